// `kvtier route`: submits requests to a cluster's router (kvtierd --role
// router) and reports where each ran, the handoff from prefill to decode and
// the blocks' throughput through the remote store.

#include "cli/commands.hpp"
#include "node/cluster_client.hpp"
#include "runtime/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <thread>

namespace kvtier::cli {
namespace {

struct route_options {
  std::string router = "127.0.0.1:7400";
  uint32_t requests = 8;
  uint32_t prompt_tokens = 512;
  uint32_t decode_tokens = 8;
  uint32_t concurrency = 1;
  uint64_t salt = 1;
  uint32_t seed = 1;
  double wait_s = 5;
  bool json = false;
  std::string node_stats;      // HOST:PORT: print that node's counters instead
  std::vector<uint64_t> where; // print the router's word on these requests instead
};

int fail(const std::string& message, int code = 2) {
  fmt::print(stderr, "kvtier route: {}\n", message);
  return code;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// "HOST:PORT" into its parts; false when it is not that.
bool split_address(const std::string& text, std::string& host, uint16_t& port) {
  auto colon = text.rfind(':');
  unsigned value = 0;
  if (colon == std::string::npos ||
      std::from_chars(text.data() + colon + 1, text.data() + text.size(), value).ec != std::errc{} || value == 0 ||
      value > 65535)
    return false;
  host = text.substr(0, colon);
  port = static_cast<uint16_t>(value);
  return true;
}

int print_node_stats(const std::string& address, std::chrono::milliseconds wait) {
  std::string host;
  uint16_t port = 0;
  if (!split_address(address, host, port))
    return fail("--node-stats: expected HOST:PORT, got \"" + address + "\"");
  auto client = node::cluster_client::connect(host, port, wait);
  if (!client)
    return fail(describe(client.error()), 1);
  auto s = (*client)->stats();
  if (!s)
    return fail(describe(s.error()), 1);
  nlohmann::json j{{"node", s->node},
                   {"role", s->role},
                   {"prefill_tokens_computed", s->prefill_tokens_computed},
                   {"tokens_recomputed", s->tokens_recomputed},
                   {"blocks_written", s->blocks_written},
                   {"blocks_pulled", s->blocks_pulled},
                   {"blocks_local", s->blocks_local},
                   {"remote_misses", s->remote_misses},
                   {"decode_tokens", s->decode_tokens},
                   {"tokens_resumed", s->tokens_resumed},
                   {"requests", s->requests}};
  fmt::print("{}\n", j.dump(2));
  return 0;
}

int run_route(const route_options& o) {
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(o.wait_s * 1000));
  if (!o.node_stats.empty())
    return print_node_stats(o.node_stats, wait);
  std::string host;
  uint16_t port = 0;
  if (!split_address(o.router, host, port))
    return fail("--router: expected HOST:PORT, got \"" + o.router + "\"");
  if (o.requests == 0 || o.prompt_tokens == 0 || o.concurrency == 0)
    return fail("--requests, --prompt-tokens and --concurrency: expected at least 1");
  auto client = node::cluster_client::connect(host, port, wait);
  if (!client)
    return fail(describe(client.error()), 1);
  if (!o.where.empty()) {
    for (auto id : o.where) {
      auto w = (*client)->where(id);
      if (!w)
        return fail(describe(w.error()), 1);
      fmt::print("request {}: {}\n", id, *w);
    }
    return 0;
  }
  // Members come up in any order: wait (up to --wait) until the router sees them all.
  auto members = (*client)->members();
  if (!members)
    return fail(describe(members.error()), 1);
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto live = (*client)->live();
    if (!live)
      return fail(describe(live.error()), 1);
    if (live->size() == members->size() || std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // Each request its own prompt, so every one is computed and moved whole.
  std::vector<node::request> all;
  for (uint32_t r = 0; r < o.requests; ++r) {
    node::request q{uint64_t{o.seed} * 1'000'000 + r, o.salt, {}, o.decode_tokens};
    for (uint32_t t = 0; t < o.prompt_tokens; ++t)
      q.prompt.push_back((o.seed * 104'729u + r * 7'919u + t * 31u) % 128'000u);
    all.push_back(std::move(q));
  }
  std::vector<node::request_result> done;
  int failures = 0;
  auto started = std::chrono::steady_clock::now();
  for (size_t at = 0; at < all.size(); at += o.concurrency) {
    std::vector<node::request> wave(all.begin() + static_cast<std::ptrdiff_t>(at),
                                    all.begin() +
                                        static_cast<std::ptrdiff_t>(std::min(all.size(), at + o.concurrency)));
    for (auto& r : (*client)->submit_all(wave)) {
      if (r)
        done.push_back(std::move(*r));
      else {
        ++failures;
        fmt::print(stderr, "kvtier route: {}\n", describe(r.error()));
      }
    }
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::vector<double> handoff_us, dispatch_us, pull_gbps, write_gbps;
  double pull_busy_ns = 0;
  uint64_t pulled = 0, pulled_bytes = 0, recomputed = 0, written_bytes = 0;
  int64_t pull_first = INT64_MAX, pull_last = 0, write_first = INT64_MAX, write_last = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : done) {
    double handoff = static_cast<double>(r.decode.decode_start_ns - r.prefill.end_ns) / 1e3;
    double pull_ns = static_cast<double>(r.decode.decode_start_ns - r.decode.pull_start_ns);
    double write_ns = static_cast<double>(r.prefill.end_ns - r.prefill.start_ns);
    handoff_us.push_back(handoff);
    dispatch_us.push_back(static_cast<double>(r.decode.pull_start_ns - r.prefill.end_ns) / 1e3);
    pull_busy_ns += pull_ns;
    if (r.decode.bytes_pulled > 0 && pull_ns > 0)
      pull_gbps.push_back(static_cast<double>(r.decode.bytes_pulled) / pull_ns);
    if (r.prefill.bytes_written > 0 && write_ns > 0)
      write_gbps.push_back(static_cast<double>(r.prefill.bytes_written) / write_ns);
    pulled += r.decode.blocks_pulled;
    pulled_bytes += r.decode.bytes_pulled;
    written_bytes += r.prefill.bytes_written;
    recomputed += r.decode.tokens_recomputed;
    pull_first = std::min(pull_first, r.decode.pull_start_ns);
    pull_last = std::max(pull_last, r.decode.decode_start_ns);
    write_first = std::min(write_first, r.prefill.start_ns);
    write_last = std::max(write_last, r.prefill.end_ns);
    rows.push_back({{"id", r.prefill.id},
                    {"prefill_node", r.prefill.node},
                    {"decode_node", r.decode.node},
                    {"decode_attempts", r.decode_attempts},
                    {"blocks", r.prefill.blocks},
                    {"blocks_pulled", r.decode.blocks_pulled},
                    {"tokens_recomputed", r.decode.tokens_recomputed},
                    {"tokens_resumed", r.decode.tokens_resumed},
                    // A resumed decode started from the prompt and its decoded tokens: another checksum.
                    {"kv_match",
                     r.decode.tokens_resumed > 0 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(r.prefill.kv_checksum == r.decode.kv_checksum)},
                    {"handoff_us", handoff},
                    {"dispatch_us", dispatch_us.back()},
                    {"pull_us", pull_ns / 1e3}});
  }
  auto span_gbps = [](uint64_t bytes, int64_t first, int64_t last) {
    return last > first ? static_cast<double>(bytes) / static_cast<double>(last - first) : 0.0;
  };
  bool all_match = std::all_of(done.begin(), done.end(), [](const auto& r) {
    return r.decode.tokens_resumed > 0 || r.prefill.kv_checksum == r.decode.kv_checksum;
  });
  auto resumed = std::count_if(done.begin(), done.end(), [](const auto& r) { return r.decode.tokens_resumed > 0; });
  nlohmann::json summary{{"requests", o.requests},
                         {"completed", done.size()},
                         {"failed", failures},
                         {"prompt_tokens", o.prompt_tokens},
                         {"concurrency", o.concurrency},
                         {"all_kv_match", all_match},
                         {"blocks_pulled", pulled},
                         {"tokens_recomputed", recomputed},
                         {"resumed", resumed},
                         {"handoff_us_p50", quantile(handoff_us, 0.5)},
                         {"handoff_us_p99", quantile(handoff_us, 0.99)},
                         {"dispatch_us_p50", quantile(dispatch_us, 0.5)},
                         {"dispatch_us_p99", quantile(dispatch_us, 0.99)},
                         {"pull_gbps_busy", pull_busy_ns > 0 ? static_cast<double>(pulled_bytes) / pull_busy_ns : 0.0},
                         {"pull_gbps_per_request_p50", quantile(pull_gbps, 0.5)},
                         {"write_gbps_per_request_p50", quantile(write_gbps, 0.5)},
                         {"pull_gbps", span_gbps(pulled_bytes, pull_first, pull_last)},
                         {"write_gbps", span_gbps(written_bytes, write_first, write_last)},
                         {"wall_s", wall_s}};
  if (o.json) {
    summary["per_request"] = rows;
    fmt::print("{}\n", summary.dump(2));
  } else {
    fmt::print("{} of {} requests completed ({} failed); every decode's KV {} its prefill's\n", done.size(), o.requests,
               failures, all_match ? "matches" : "DOES NOT match");
    fmt::print("handoff (prefill end -> decode start): p50 {:.0f} us, p99 {:.0f} us; of it, the router's hop to the "
               "decode node (prefill end -> pull start): p50 {:.0f} us, p99 {:.0f} us\n",
               quantile(handoff_us, 0.5), quantile(handoff_us, 0.99), quantile(dispatch_us, 0.5),
               quantile(dispatch_us, 0.99));
    fmt::print("remote store: {} blocks pulled at {:.3f} GB/s, written at {:.3f} GB/s; {} tokens recomputed\n", pulled,
               span_gbps(pulled_bytes, pull_first, pull_last), span_gbps(written_bytes, write_first, write_last),
               recomputed);
    if (resumed > 0)
      fmt::print("{} requests moved mid-decode and resumed after their checkpointed tokens\n", resumed);
  }
  return failures == 0 && all_match ? 0 : 1;
}

} // namespace

command add_route_command(CLI::App& app) {
  auto o = std::make_shared<route_options>();
  auto* sub = app.add_subcommand("route", "submit requests to a cluster's router (kvtierd --role router)");
  sub->add_option("--router", o->router, "the router's HOST:PORT")->capture_default_str();
  sub->add_option("--requests", o->requests, "requests to submit")->capture_default_str();
  sub->add_option("--prompt-tokens", o->prompt_tokens, "each request's prompt")->capture_default_str();
  sub->add_option("--decode-tokens", o->decode_tokens, "tokens each request decodes")->capture_default_str();
  sub->add_option("--concurrency", o->concurrency, "requests in flight at once")->capture_default_str();
  sub->add_option("--salt", o->salt, "the tenant salt of every request")->capture_default_str();
  sub->add_option("--seed", o->seed, "varies the prompts (and the request ids) between runs")->capture_default_str();
  sub->add_option("--wait", o->wait_s, "seconds to wait for the router and its members")->capture_default_str();
  sub->add_flag("--json", o->json, "print the summary and every request as JSON");
  sub->add_option("--node-stats", o->node_stats, "print the counters of the node at HOST:PORT (no requests)");
  sub->add_option("--where", o->where, "print where the router has these requests (no requests)");
  return {sub, [o] { return run_route(*o); }};
}

} // namespace kvtier::cli
