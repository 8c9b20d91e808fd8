#pragma once
// What the NVMe page store is opened with: the configured engine settings
// (runtime/nvme_settings.hpp, read and checked by runtime/config) plus what
// only a running store needs. io/ reads no configuration file.

#include "io/page_file.hpp"
#include "runtime/nvme_settings.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace kvtier::io {

using engine_choice = nvme_engine;
using open_policy = nvme_open_policy;

struct nvme_options : nvme_settings {
  std::string file;              // the slot file (see slot_file_path)
  uint32_t payload_encoding = 0; // slot_geometry::encoding
  /// Wraps the engine (tests: fault injection). Identity when empty.
  std::function<std::unique_ptr<page_file>(std::unique_ptr<page_file>)> decorate;
};

/// Options for a store of the configured settings in directory `nvme_path`.
nvme_options make_nvme_options(const nvme_settings& settings, const std::string& nvme_path);

/// The slot file inside the configured tiers.nvme_path directory.
std::string slot_file_path(const std::string& nvme_path);

std::string_view to_string(engine_choice e);

} // namespace kvtier::io
