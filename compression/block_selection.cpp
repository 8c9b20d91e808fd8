#include "compression/block_selection.hpp"

#include "runtime/splitmix.hpp"

#include <algorithm>
#include <numeric>

namespace kvtier::compression {
namespace {

bool positional(std::string_view p) {
  return p == "streaming_llm" || p == "sliding_window" || p == "ratio";
}

} // namespace

bool accumulates(std::string_view policy) {
  return policy == "h2o" || policy == "h2o_window" || policy == "h2o_raw";
}

std::vector<double> block_scores(const block_choice& c) {
  const uint64_t B = c.block_tokens;
  const size_t n = static_cast<size_t>((c.kv_tokens + B - 1) / B);
  std::vector<double> score(n);
  const bool measured = c.mass.size() == n && !positional(c.policy);
  for (size_t b = 0; b < n; ++b) {
    if (c.policy == "random") {
      score[b] = static_cast<double>(splitmix64(c.seed * 0x1000193ull + b) >> 11);
    } else if (!measured) {
      score[b] = static_cast<double>(b);
    } else if (c.policy == "h2o_raw" || c.policy == "snapkv") {
      score[b] = c.mass[b];
    } else {
      // Observed queries sit at the table's last mass_queries entries; the
      // ones at or past the block's first entry could attend to it.
      const uint64_t first_query = c.kv_tokens - std::min<uint64_t>(c.mass_queries, c.kv_tokens);
      const uint64_t start = b * B;
      const uint64_t seen_by = c.kv_tokens - std::max(first_query, start);
      score[b] = c.mass[b] / static_cast<double>(std::max<uint64_t>(seen_by, 1));
    }
    if (measured && accumulates(c.policy) && c.earlier.size() == n)
      score[b] += c.earlier[b];
  }
  return score;
}

std::vector<uint32_t> blocks_to_drop(const block_choice& c) {
  const uint64_t B = c.block_tokens;
  const auto n = static_cast<uint32_t>((c.kv_tokens + B - 1) / B);
  if (n < 2)
    return {};
  std::vector<bool> keep(n, false);
  keep[n - 1] = true; // partial or not, the next tokens go there
  const bool sinks = c.policy != "sliding_window" && c.policy != "ratio";
  for (uint64_t b = 0; sinks && b * B < c.sinks && b < n; ++b)
    keep[b] = true;
  const uint64_t recent_from = c.kv_tokens - std::min<uint64_t>(c.recent, c.kv_tokens);
  for (uint64_t b = recent_from / B; b < n; ++b)
    keep[b] = true;
  auto kept = static_cast<uint64_t>(std::count(keep.begin(), keep.end(), true));
  const uint64_t want = std::min<uint64_t>(n, (c.keep_tokens + B - 1) / B);
  if (kept < want) {
    auto score = block_scores(c);
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    // Highest score first; ties to the later block.
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return score[a] != score[b] ? score[a] > score[b] : a > b; });
    for (uint32_t b : order) {
      if (kept >= want)
        break;
      if (!keep[b])
        keep[b] = true, ++kept;
    }
  }
  std::vector<uint32_t> drop;
  for (uint32_t b = 0; b + 1 < n; ++b)
    if (!keep[b])
      drop.push_back(b);
  return drop;
}

double mass_kept(std::span<const float> mass, std::span<const uint32_t> dropped) {
  double total = 0, lost = 0;
  for (float m : mass)
    total += m;
  for (uint32_t b : dropped)
    if (b < mass.size())
      lost += mass[b];
  return total > 0 ? (total - lost) / total : 1.0;
}

} // namespace kvtier::compression
