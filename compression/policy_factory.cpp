#include "compression/policy_factory.hpp"

#include "compression/baselines.hpp"
#include "compression/h2o.hpp"
#include "compression/snapkv.hpp"
#include "compression/streaming_llm.hpp"
#include "runtime/error.hpp"

#include <string>

namespace kvtier::compression {

const std::vector<std::string_view>& policy_names() {
  static const std::vector<std::string_view> names{"random", "streaming_llm", "sliding_window", "h2o_raw",
                                                   "h2o",    "h2o_window",    "snapkv",         "oracle"};
  return names;
}

caf::expected<std::unique_ptr<policy>> make_policy(std::string_view name, const policy_settings& s,
                                                   const observed_attention* future) {
  protection p{s.sinks, s.recent};
  if (name == "random")
    return std::make_unique<random_eviction>(s.seed, p);
  if (name == "streaming_llm")
    return std::make_unique<streaming_llm>(s.sinks);
  if (name == "sliding_window")
    return std::make_unique<sliding_window>();
  if (name == "h2o_raw")
    return std::make_unique<h2o>(h2o_accumulation::raw, p);
  if (name == "h2o")
    return std::make_unique<h2o>(h2o_accumulation::normalized, p);
  if (name == "h2o_window")
    return std::make_unique<h2o>(h2o_accumulation::window, p, s.window);
  if (name == "snapkv")
    return std::make_unique<snapkv>(s.window, s.pool, s.sinks);
  if (name == "oracle") {
    if (!future)
      return make_error(errc::invalid_argument, "policy 'oracle' needs the future queries' attention");
    return std::make_unique<oracle>(*future);
  }
  std::string list;
  for (auto n : policy_names())
    list += (list.empty() ? "" : ", ") + std::string(n);
  return make_error(errc::invalid_argument,
                    "unknown compression policy '" + std::string(name) + "'; expected one of " + list);
}

} // namespace kvtier::compression
