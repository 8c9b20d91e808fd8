#include "runtime/config_names.hpp"

namespace kvtier {
namespace {

constexpr std::array<enum_spelling<backend_kind>, 2> backends{
    {{"sim", backend_kind::sim}, {"real", backend_kind::real}}};
constexpr std::array<enum_spelling<eviction_policy>, 6> evictions{{
    {"lru", eviction_policy::lru},
    {"oracle", eviction_policy::oracle},
    {"arc", eviction_policy::arc},
    {"s3fifo", eviction_policy::s3fifo},
    {"lfuda", eviction_policy::lfuda},
    {"predictor", eviction_policy::predictor},
}};
constexpr std::array<enum_spelling<cache_hierarchy>, 2> hierarchies{
    {{"inclusive", cache_hierarchy::inclusive}, {"exclusive", cache_hierarchy::exclusive}}};
constexpr std::array<enum_spelling<slot_placement_kind>, 2> placements{
    {{"contiguous", slot_placement_kind::contiguous}, {"eviction_order", slot_placement_kind::eviction_order}}};
constexpr std::array<enum_spelling<preemption_mode>, 3> preemptions{
    {{"auto", preemption_mode::automatic}, {"swap", preemption_mode::swap}, {"recompute", preemption_mode::recompute}}};
constexpr std::array<enum_spelling<compression_policy>, 10> compressions{{
    {"none", compression_policy::none},
    {"ratio", compression_policy::ratio},
    {"h2o", compression_policy::h2o},
    {"h2o_window", compression_policy::h2o_window},
    {"h2o_raw", compression_policy::h2o_raw},
    {"snapkv", compression_policy::snapkv},
    {"streaming_llm", compression_policy::streaming_llm},
    {"sliding_window", compression_policy::sliding_window},
    {"random", compression_policy::random},
    {"oracle", compression_policy::oracle},
}};
constexpr std::array<enum_spelling<trace_format_choice>, 5> trace_formats{{
    {"auto", trace_format_choice::automatic},
    {"mooncake", trace_format_choice::mooncake},
    {"azure", trace_format_choice::azure},
    {"burstgpt", trace_format_choice::burstgpt},
    {"synthetic", trace_format_choice::synthetic},
}};
constexpr std::array<enum_spelling<copy_kernel_use>, 2> kernel_uses{
    {{"on_demand", copy_kernel_use::on_demand}, {"never", copy_kernel_use::never}}};
constexpr std::array<enum_spelling<nvme_engine>, 3> engines{
    {{"auto", nvme_engine::automatic}, {"io_uring", nvme_engine::uring}, {"threads", nvme_engine::threads}}};
constexpr std::array<enum_spelling<nvme_open_policy>, 2> open_policies{
    {{"reuse", nvme_open_policy::reuse}, {"reformat", nvme_open_policy::reformat}}};
constexpr std::array<enum_spelling<compute_kind>, 2> compute_kinds{
    {{"modeled", compute_kind::modeled}, {"model", compute_kind::model}}};
constexpr std::array<enum_spelling<router_kind>, 3> routers{{{"round_robin", router_kind::round_robin},
                                                             {"least_loaded", router_kind::least_loaded},
                                                             {"cache_aware", router_kind::cache_aware}}};
constexpr std::array<enum_spelling<remote_kind>, 2> remote_kinds{
    {{"none", remote_kind::none}, {"redis", remote_kind::redis}}};

} // namespace

std::span<const enum_spelling<backend_kind>> spellings(backend_kind) {
  return backends;
}
std::span<const enum_spelling<cache_hierarchy>> spellings(cache_hierarchy) {
  return hierarchies;
}
std::span<const enum_spelling<slot_placement_kind>> spellings(slot_placement_kind) {
  return placements;
}

std::span<const enum_spelling<eviction_policy>> spellings(eviction_policy) {
  return evictions;
}
std::span<const enum_spelling<preemption_mode>> spellings(preemption_mode) {
  return preemptions;
}
std::span<const enum_spelling<compression_policy>> spellings(compression_policy) {
  return compressions;
}
std::span<const enum_spelling<trace_format_choice>> spellings(trace_format_choice) {
  return trace_formats;
}
std::span<const enum_spelling<copy_kernel_use>> spellings(copy_kernel_use) {
  return kernel_uses;
}
std::span<const enum_spelling<nvme_engine>> spellings(nvme_engine) {
  return engines;
}
std::span<const enum_spelling<nvme_open_policy>> spellings(nvme_open_policy) {
  return open_policies;
}

std::span<const enum_spelling<compute_kind>> spellings(compute_kind) {
  return compute_kinds;
}

std::string_view offload_dtype_name(const std::optional<kv_dtype>& dtype) {
  return dtype ? name_of(*dtype) : std::string_view{"none"};
}

std::span<const enum_spelling<router_kind>> spellings(router_kind) {
  return routers;
}

std::span<const enum_spelling<remote_kind>> spellings(remote_kind) {
  return remote_kinds;
}

} // namespace kvtier
