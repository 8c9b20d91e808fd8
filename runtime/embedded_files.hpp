#pragma once
// Files compiled into the binary (configs/hardware/*.toml, configs/default.toml),
// so kvtier runs its defaults from any directory.

#include <optional>
#include <span>
#include <string_view>

namespace kvtier {

struct embedded {
  std::string_view name; // path below configs/, e.g. "hardware/h200.toml"
  std::string_view text;
};

std::span<const embedded> embedded_files();
std::optional<std::string_view> embedded_file(std::string_view name);

} // namespace kvtier
