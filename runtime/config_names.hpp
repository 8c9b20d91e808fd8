#pragma once
// How the config's enums are spelled in TOML, on the command line and in
// reports. Each table lists every value once; name_of and the readers use the
// same table, so a spelling accepted is a spelling printed.

#include "runtime/config.hpp"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvtier {

template <class E>
struct enum_spelling {
  std::string_view name;
  E value;
};

std::span<const enum_spelling<backend_kind>> spellings(backend_kind);
std::span<const enum_spelling<eviction_policy>> spellings(eviction_policy);
std::span<const enum_spelling<cache_hierarchy>> spellings(cache_hierarchy);
std::span<const enum_spelling<slot_placement_kind>> spellings(slot_placement_kind);
std::span<const enum_spelling<preemption_mode>> spellings(preemption_mode);
std::span<const enum_spelling<compression_policy>> spellings(compression_policy);
std::span<const enum_spelling<trace_format_choice>> spellings(trace_format_choice);
std::span<const enum_spelling<copy_kernel_use>> spellings(copy_kernel_use);
std::span<const enum_spelling<nvme_engine>> spellings(nvme_engine);
std::span<const enum_spelling<nvme_open_policy>> spellings(nvme_open_policy);
std::span<const enum_spelling<compute_kind>> spellings(compute_kind);
std::span<const enum_spelling<router_kind>> spellings(router_kind);
std::span<const enum_spelling<remote_kind>> spellings(remote_kind);

template <class E>
std::string_view name_of(E value) {
  for (const auto& s : spellings(E{}))
    if (s.value == value)
      return s.name;
  return "?";
}

template <class E>
std::optional<E> parse_choice(std::string_view text) {
  for (const auto& s : spellings(E{}))
    if (s.name == text)
      return s.value;
  return std::nullopt;
}

/// "a, b, c": the spellings in table order, for messages.
template <class E>
std::string spelling_list() {
  std::string list;
  for (const auto& s : spellings(E{}))
    list += (list.empty() ? "" : ", ") + std::string(s.name);
  return list;
}

/// "none" or the dtype's name.
std::string_view offload_dtype_name(const std::optional<kv_dtype>& dtype);

} // namespace kvtier
