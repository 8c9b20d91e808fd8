#pragma once
// Hardware profile files (configs/hardware/*.toml), read and written in one
// place: what `kvtier calibrate` and `kvtier nvme --calibrate` write is what
// the reader accepts, and both go through the same bounds
// (runtime/config_bounds.hpp) as a profile built in code (validate_hardware).

#include "runtime/hardware.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kvtier {

/// A hardware profile by name (built in) or by path (a .toml file; a regular
/// file of at most 16 MiB). Errors are errc::invalid_config naming the file,
/// line, table and key.
caf::expected<hardware_profile> load_hardware_profile(const std::string& name_or_path);
caf::expected<hardware_profile> parse_hardware_profile(std::string_view text, const std::string& name);

/// The first value of `hw` outside its bounds: "[gpu] bf16_tflops: expected a
/// number in 0.1..1000000, got nan", or nullopt.
struct hardware_problem {
  std::string table;
  std::string key;
  std::string what;
};
std::optional<hardware_problem> find_hardware_problem(const hardware_profile& hw);

/// The whole profile as TOML text, starting with the comment line `note`.
/// Sizes that are whole TB or GB are written so ("2TB"), others as bytes.
std::string hardware_profile_toml(const hardware_profile& hw, const std::string& note);
/// The [nvme_device] table alone (what `kvtier nvme --calibrate` prints).
std::string nvme_device_toml(const nvme_profile& nvme);

} // namespace kvtier
