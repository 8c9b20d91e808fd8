#include "daemon/metrics.hpp"

#include "daemon/block_store.hpp"
#include "daemon/tenants.hpp"

#include <fmt/format.h>

#include <ctime>

namespace kvtier::daemon {

void latency_histogram::add(double seconds) {
  std::size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i])
    ++i;
  ++counts[i];
  sum += seconds;
  ++count;
}

void daemon_metrics::record(wire::op op, double seconds, client::errc status) {
  ops_[index(op)].add(seconds);
  if (status != client::errc::ok)
    ++errors_[static_cast<std::size_t>(status)];
}

namespace {

void help(std::string& out, const char* name, const char* type, const char* text) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, text, name, type);
}

// One histogram's series; `labels` is empty or `key="value",`.
void histogram(std::string& out, const char* name, const std::string& labels, const latency_histogram& h) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_histogram::bounds.size(); ++i) {
    cumulative += h.counts[i];
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{}le=\"{}\"}} {}\n", name, labels, latency_histogram::bounds[i],
                   cumulative);
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{{{}le=\"+Inf\"}} {}\n", name, labels, h.count);
  const std::string bare = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
  fmt::format_to(std::back_inserter(out), "{}_sum{} {}\n{}_count{} {}\n", name, bare, h.sum, name, bare, h.count);
}

// CPU seconds of the calling thread: render() runs on the io thread.
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

} // namespace

std::string daemon_metrics::render(const block_store& store, const tenant_table& tenants,
                                   std::uint64_t sessions_open) const {
  std::string out;
  auto line = [&](const std::string& name, auto value) {
    fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
  };

  help(out, "kvtier_request_duration_seconds", "histogram",
       "Service time: a request's frame decoded to its reply queued, by operation");
  for (std::uint16_t o = 1; o <= 8; ++o) {
    const auto op = static_cast<wire::op>(o);
    histogram(out, "kvtier_request_duration_seconds", fmt::format("op=\"{}\",", wire::to_string(op)), ops_[index(op)]);
  }
  help(out, "kvtier_io_loop_lag_seconds", "histogram",
       "How late the io thread ran a due timer (sampled every 10 ms): what a request waits before it is read");
  histogram(out, "kvtier_io_loop_lag_seconds", "", io_lag_);
  help(out, "kvtier_io_thread_cpu_seconds_total", "counter", "CPU time of the io thread");
  line("kvtier_io_thread_cpu_seconds_total", thread_cpu_seconds());
  help(out, "kvtier_request_errors_total", "counter", "Requests refused, by error code");
  for (std::size_t c = 1; c < errors_.size(); ++c)
    line(fmt::format("kvtier_request_errors_total{{code=\"{}\"}}", client::to_string(static_cast<client::errc>(c))),
         errors_[c]);
  help(out, "kvtier_frames_rejected_total", "counter", "Frames that closed their connection (malformed, oversized)");
  line("kvtier_frames_rejected_total", frames_rejected_);
  help(out, "kvtier_sessions", "gauge", "Client connections open");
  line("kvtier_sessions", sessions_open);
  help(out, "kvtier_sessions_total", "counter", "Client connections accepted");
  line("kvtier_sessions_total", sessions_total_);

  const auto& c = store.counters();
  const std::uint64_t lookups = c.hits_dram + c.hits_nvme + c.misses;
  help(out, "kvtier_lookups_total", "counter", "Keys looked up by exists and get, by the tier that held them");
  line("kvtier_lookups_total{tier=\"dram\"}", c.hits_dram);
  line("kvtier_lookups_total{tier=\"nvme\"}", c.hits_nvme);
  line("kvtier_lookups_total{tier=\"miss\"}", c.misses);
  help(out, "kvtier_hit_ratio", "gauge", "Hits over lookups since start, by tier");
  line("kvtier_hit_ratio{tier=\"dram\"}", lookups ? double(c.hits_dram) / double(lookups) : 0.0);
  line("kvtier_hit_ratio{tier=\"nvme\"}", lookups ? double(c.hits_nvme) / double(lookups) : 0.0);
  line("kvtier_hit_ratio{tier=\"all\"}", lookups ? double(c.hits_dram + c.hits_nvme) / double(lookups) : 0.0);
  help(out, "kvtier_evictions_total", "counter", "Blocks evicted, by tier");
  line("kvtier_evictions_total{tier=\"dram\"}", c.evictions_dram);
  line("kvtier_evictions_total{tier=\"nvme\"}", c.evictions_nvme);
  help(out, "kvtier_blocks", "gauge", "Blocks held, by tier");
  line("kvtier_blocks{tier=\"dram\"}", store.dram_used());
  line("kvtier_blocks{tier=\"nvme\"}", store.nvme_used());
  help(out, "kvtier_capacity_blocks", "gauge", "Block slots, by tier");
  line("kvtier_capacity_blocks{tier=\"dram\"}", store.dram_capacity());
  line("kvtier_capacity_blocks{tier=\"nvme\"}", store.nvme_capacity());
  help(out, "kvtier_occupancy_ratio", "gauge", "Blocks held over slots, by tier");
  line("kvtier_occupancy_ratio{tier=\"dram\"}",
       double(store.dram_used()) / double(std::max(1u, store.dram_capacity())));
  line("kvtier_occupancy_ratio{tier=\"nvme\"}",
       double(store.nvme_used()) / double(std::max(1u, store.nvme_capacity())));
  help(out, "kvtier_fragmentation_ratio", "gauge",
       "Bytes of a tier neither holding a block nor free for one; fixed-size slots make it 0 by construction");
  line("kvtier_fragmentation_ratio{tier=\"dram\"}", 0);
  line("kvtier_fragmentation_ratio{tier=\"nvme\"}", 0);
  help(out, "kvtier_recovered_blocks", "gauge", "NVMe blocks found on disk at start and served from then on");
  line("kvtier_recovered_blocks", c.recovered);
  help(out, "kvtier_client_bytes_total", "counter", "Block bytes copied to and from client regions");
  line("kvtier_client_bytes_total{direction=\"get\"}", c.bytes_to_clients);
  line("kvtier_client_bytes_total{direction=\"set\"}", c.bytes_from_clients);
  help(out, "kvtier_copy_seconds_total", "counter",
       "Seconds spent copying blocks between tiers and client regions, by the thread that copied");
  line("kvtier_copy_seconds_total{thread=\"io\"}", c.copy_seconds);
  line("kvtier_copy_seconds_total{thread=\"copy\"}", store.pool_copy_seconds());
  help(out, "kvtier_copied_blocks_total", "counter",
       "Blocks copied between tiers and client regions, by the thread that copied (io: batches of at most 64 KiB, "
       "or no copy threads)");
  line("kvtier_copied_blocks_total{thread=\"io\"}", c.copies);
  line("kvtier_copied_blocks_total{thread=\"copy\"}", store.pool_copies());
  help(out, "kvtier_store_failures_total", "counter", "Blocks a get or set could not move (tier I/O, no free slot)");
  line("kvtier_store_failures_total{op=\"get\"}", c.read_failures);
  line("kvtier_store_failures_total{op=\"set\"}", c.write_failures);
  // Links: what each moved, how long it was busy, its GB/s while busy and
  // that rate against the link's stated limit. "copy" is the memcpy between
  // DRAM slots and client regions (busy: the seconds copying, on any thread).
  const auto reads = store.nvme_reads(), writes = store.nvme_writes();
  struct link_row {
    const char* name;
    double bytes, busy, limit_gbps;
  };
  const link_row links[] = {
      {"copy", double(c.bytes_to_clients + c.bytes_from_clients), c.copy_seconds + store.pool_copy_seconds(),
       limits_.copy},
      {"nvme_read", double(reads.bytes), reads.busy_seconds, limits_.nvme_read},
      {"nvme_write", double(writes.bytes), writes.busy_seconds, limits_.nvme_write},
  };
  help(out, "kvtier_link_bytes_total", "counter", "Bytes moved per link");
  for (const auto& l : links)
    line(fmt::format("kvtier_link_bytes_total{{link=\"{}\"}}", l.name), l.bytes);
  help(out, "kvtier_link_busy_seconds_total", "counter",
       "Seconds a link had transfers in flight: bytes over busy seconds is its GB/s while busy");
  for (const auto& l : links)
    line(fmt::format("kvtier_link_busy_seconds_total{{link=\"{}\"}}", l.name), l.busy);
  help(out, "kvtier_link_gbps", "gauge", "A link's GB/s (1e9 bytes) while busy, since start");
  for (const auto& l : links)
    line(fmt::format("kvtier_link_gbps{{link=\"{}\"}}", l.name), l.busy > 0 ? l.bytes / l.busy / 1e9 : 0.0);
  help(out, "kvtier_link_limit_gbps", "gauge",
       "A link's stated limit in GB/s ([dram] copy_gbps, [nvme] read_gbps / write_gbps); links without one are "
       "not listed");
  help(out, "kvtier_link_utilization_ratio", "gauge", "A link's GB/s while busy over its stated limit");
  for (const auto& l : links)
    if (l.limit_gbps > 0) {
      line(fmt::format("kvtier_link_limit_gbps{{link=\"{}\"}}", l.name), l.limit_gbps);
      line(fmt::format("kvtier_link_utilization_ratio{{link=\"{}\"}}", l.name),
           l.busy > 0 ? l.bytes / l.busy / 1e9 / l.limit_gbps : 0.0);
    }

  help(out, "kvtier_tenant_lookups_total", "counter", "Keys looked up, by tenant and result");
  for (std::uint32_t t = 0; t < tenants.size(); ++t) {
    line(fmt::format("kvtier_tenant_lookups_total{{tenant=\"{}\",result=\"hit\"}}", tenants[t].config.name),
         tenants[t].hits);
    line(fmt::format("kvtier_tenant_lookups_total{{tenant=\"{}\",result=\"miss\"}}", tenants[t].config.name),
         tenants[t].misses);
  }
  help(out, "kvtier_tenant_hit_ratio", "gauge", "Hits over lookups since start, by tenant");
  for (std::uint32_t t = 0; t < tenants.size(); ++t) {
    const auto n = tenants[t].hits + tenants[t].misses;
    line(fmt::format("kvtier_tenant_hit_ratio{{tenant=\"{}\"}}", tenants[t].config.name),
         n ? double(tenants[t].hits) / double(n) : 0.0);
  }
  help(out, "kvtier_tenant_blocks", "gauge", "Blocks each tenant holds in the tier of record (what its quota counts)");
  for (std::uint32_t t = 0; t < tenants.size(); ++t)
    line(fmt::format("kvtier_tenant_blocks{{tenant=\"{}\"}}", tenants[t].config.name), store.tenant_blocks(t));
  help(out, "kvtier_tenant_quota_refusals_total", "counter", "Batches refused by the tenant's quota");
  for (std::uint32_t t = 0; t < tenants.size(); ++t)
    line(fmt::format("kvtier_tenant_quota_refusals_total{{tenant=\"{}\"}}", tenants[t].config.name),
         tenants[t].refusals);
  return out;
}

} // namespace kvtier::daemon
