// bench/cache_policy: the replacement policies of cache/ against LRU and
// Belady, at each capacity, on the bundled Mooncake trace (512-token blocks,
// and the default config's 16-token blocks at the same bytes) and on the
// seeded synthetic sessions of configs/experiments/synthetic-sessions.toml;
// the bundled Azure and BurstGPT traces, which carry no block ids, too.
//
// Per capacity (HBM + DRAM + NVMe blocks): prefix hit ratio of LRU in the
// inclusive and the exclusive hierarchy, of ARC, S3-FIFO, LFU-DA and the
// reuse predictor (exclusive), and Belady's bound for the same memory; the
// share of the LRU -> Belady gap each policy closes (LRU exclusive is the
// baseline, measured in the same run) and the predictor / LRU hit ratio.
// Prints a table and JSON (also to --json FILE). --quick: 512-token blocks only;
// --policies NAME,...: only those contenders (LRU and Belady always run).

#include "cache/belady.hpp"
#include "cache/gap.hpp"
#include "cache/tier_replay.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "sim/policy_standing.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

struct workload {
  std::string name;
  trace t;
  uint32_t block_tokens;
  uint32_t scale; // capacities are {1k, 4k, 1k+3k, 1k+3k+16k} x scale blocks
};

constexpr std::array<std::array<uint64_t, 3>, 4> capacities{
    {{1000, 0, 0}, {4000, 0, 0}, {1000, 3000, 0}, {1000, 3000, 16000}}};
constexpr std::array<cache::policy_kind, 5> all_contenders{cache::policy_kind::arc, cache::policy_kind::s3fifo,
                                                           cache::policy_kind::lfuda, cache::policy_kind::predictor,
                                                           cache::policy_kind::shared_predictor};
std::vector<cache::policy_kind> contenders(all_contenders.begin(), all_contenders.end());

nlohmann::json measure(const workload& w) {
  auto chains = dense_chains_of(w.t, w.block_tokens);
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("\n{} ({} requests, {}-token blocks, {} distinct blocks)\n", w.name, w.t.requests.size(), w.block_tokens,
             chains.keys);
  std::string heads;
  for (auto k : contenders)
    heads += fmt::format(" {:>15}", fmt::format("{} (gap)", cache::name_of(k)));
  fmt::print("  {:<22} {:>8} {:>8}{} {:>8} {:>9}\n", "capacity (blocks)", "LRU-inc", "LRU-exc", heads, "Belady",
             "pred/LRU");
  for (auto base : capacities) {
    std::array<uint64_t, 3> caps{base[0] * w.scale, base[1] * w.scale, base[2] * w.scale};
    auto total = caps[0] + caps[1] + caps[2];
    auto start = std::chrono::steady_clock::now();
    double lru_inc =
        cache::replay_tiers(chains.chains, chains.keys, caps, cache::policy_kind::lru, cache::hierarchy_kind::inclusive)
            .hit_ratio();
    double lru =
        cache::replay_tiers(chains.chains, chains.keys, caps, cache::policy_kind::lru, cache::hierarchy_kind::exclusive)
            .hit_ratio();
    double belady = cache::belady_prefix_hits(chains.chains, chains.keys, total).hit_ratio();
    nlohmann::json row{{"hbm", caps[0]},           {"dram", caps[1]},      {"nvme", caps[2]},
                       {"lru_inclusive", lru_inc}, {"lru_exclusive", lru}, {"belady", belady}};
    std::string cells;
    double predictor = 0;
    for (auto k : contenders) {
      double h = cache::replay_tiers(chains.chains, chains.keys, caps, k, cache::hierarchy_kind::exclusive).hit_ratio();
      auto gap = cache::gap_closed(h, lru, belady);
      row[std::string(cache::name_of(k))] = {{"hit_ratio", h},
                                             {"gap_closed", gap ? nlohmann::json(*gap) : nlohmann::json()}};
      cells += fmt::format(" {:>7.4f} ({:>5})", h, gap ? fmt::format("{:.0f}%", 100 * *gap) : "n/a");
      if (k == cache::policy_kind::predictor)
        predictor = h;
    }
    row["predictor_over_lru"] = lru > 0 ? predictor / lru : 0.0;
    row["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string label = caps[2] ? fmt::format("{}+{}+{}", caps[0], caps[1], caps[2])
        : caps[1]               ? fmt::format("{}+{}", caps[0], caps[1])
                                : fmt::format("{}", caps[0]);
    fmt::print("  {:<22} {:>8.4f} {:>8.4f}{} {:>8.4f} {:>8.2f}x\n", label, lru_inc, lru, cells, belady,
               row["predictor_over_lru"].get<double>());
    rows.push_back(row);
  }
  return {{"workload", w.name}, {"block_tokens", w.block_tokens}, {"rows", rows}};
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--policies") && i + 1 < argc) {
      // A comma-separated subset of the contenders, by name.
      std::string wanted = std::string(",") + argv[++i] + ",";
      contenders.clear();
      for (auto k : all_contenders)
        if (wanted.find(fmt::format(",{},", cache::name_of(k))) != std::string::npos)
          contenders.push_back(k);
    }
  }
  std::vector<workload> loads;
  auto mooncake = read_default_trace(trace_format::mooncake);
  if (!mooncake) {
    fmt::print(stderr, "bench_cache_policy: {}\n", describe(mooncake.error()));
    return 1;
  }
  loads.push_back({"mooncake conversation", *mooncake, 512, 1});
  if (!quick)
    loads.push_back({"mooncake conversation, same bytes", *mooncake, 16, 32});
  // The other bundled traces carry no block ids: every chain is empty, so
  // they show that no policy finds anything to keep there.
  for (auto [path, format, name] :
       {std::tuple{"sim/traces/azure_llm_2023_conv.csv", trace_format::azure, "azure conversation"},
        std::tuple{"sim/traces/burstgpt_sample.csv", trace_format::burstgpt, "burstgpt sample"}}) {
    if (auto other = read_trace(path, format))
      loads.push_back({name, *other, 16, 1});
    else
      fmt::print(stderr, "bench_cache_policy: {} skipped: {}\n", name, describe(other.error()));
  }
  auto cfg = load_config("configs/experiments/synthetic-sessions.toml");
  if (cfg && cfg->sim.synthetic) {
    if (auto syn = generate_synthetic(*cfg->sim.synthetic))
      loads.push_back({"synthetic sessions (configs/experiments/synthetic-sessions.toml)", *syn, 16, 1});
  } else {
    fmt::print(stderr, "bench_cache_policy: synthetic workload skipped (run from the source root)\n");
  }
  fmt::print("bench_cache_policy: prefix hit ratio by policy; gap = share of the LRU (exclusive) -> Belady gap "
             "closed; policies other than LRU-inc run the exclusive hierarchy\n");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : loads)
    out.push_back(measure(w));
  fmt::print("\n{}\n", out.dump(2));
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      fmt::print(stderr, "bench_cache_policy: cannot write {}\n", json_path);
      return 1;
    }
  }
  return 0;
}
