#pragma once
// Named model shapes (from each model's published config.json).

#include "runtime/kv_geometry.hpp"

#include <optional>
#include <span>
#include <string_view>

namespace kvtier {

/// Every preset kvtier knows, in a stable order.
std::span<const model_spec> model_presets();

/// The preset called `name` (case-insensitive), if any.
std::optional<model_spec> find_model_preset(std::string_view name);

} // namespace kvtier
