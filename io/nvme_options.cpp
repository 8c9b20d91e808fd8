#include "io/nvme_options.hpp"

namespace kvtier::io {

nvme_options make_nvme_options(const nvme_settings& settings, const std::string& nvme_path) {
  nvme_options out;
  static_cast<nvme_settings&>(out) = settings;
  out.file = slot_file_path(nvme_path);
  return out;
}

std::string slot_file_path(const std::string& nvme_path) {
  if (!nvme_path.empty() && nvme_path.back() == '/')
    return nvme_path + "kvtier.slots";
  return nvme_path + "/kvtier.slots";
}

std::string_view to_string(engine_choice e) {
  switch (e) {
    case engine_choice::automatic:
      return "auto";
    case engine_choice::uring:
      return "io_uring";
    case engine_choice::threads:
      return "threads";
  }
  return "?";
}

} // namespace kvtier::io
