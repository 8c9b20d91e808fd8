// _kvtier: the compiled part of the `kvtier` Python package (python/kvtier/
// holds the rest and is what users import).

#include "python/bindings.hpp"

PYBIND11_MODULE(_kvtier, m) {
  m.doc() = "kvtier's compiled core; import kvtier instead";
  pybind11::register_exception<kvtier::python::error>(m, "Error");
  kvtier::python::bind_simulate(m);
#ifdef KVTIER_PYTHON_CLIENT
  kvtier::python::bind_client(m);
#endif
}
