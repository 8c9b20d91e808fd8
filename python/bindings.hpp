#pragma once
// The parts of the _kvtier extension module, each bound by its own file and
// registered by module.cpp. Errors reach Python as _kvtier.Error (the
// located message kvtier would print), never as a crash.

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace kvtier::python {

/// Raised to Python as _kvtier.Error, with kvtier's message.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// simulate(config, config_is_path, config_label, trace, overrides) -> the report as JSON text.
void bind_simulate(pybind11::module_& m);

/// Client and Region: kvtierd's client library (only where it is built).
void bind_client(pybind11::module_& m);

} // namespace kvtier::python
