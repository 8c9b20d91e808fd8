#include "io/calibration.hpp"

#include "runtime/error.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

namespace kvtier::io {

block_hash bench_hash(uint32_t nvme_slot) {
  return {nvme_slot + 1ull, 0x6b767469657221ull};
}

load_result run_random_load(slot_store& store, page_op op, uint32_t qd, double seconds, uint64_t seed) {
  const uint32_t slots = store.geometry().slots;
  // A worker looks for a free slot while holding the lock; with more workers
  // than slots it would spin there forever, so there are never more.
  qd = std::min(qd, slots);
  std::mutex m;
  std::condition_variable cv;
  std::unordered_set<uint32_t> busy; // GUARDED_BY(m)
  std::mt19937_64 rng{seed};         // GUARDED_BY(m)
  uint64_t done = 0;                 // GUARDED_BY(m)
  uint32_t running = qd;             // GUARDED_BY(m)
  std::atomic<uint64_t> failed{0};
  std::atomic<bool> stop{false};
  std::function<void(uint32_t)> start = [&](uint32_t worker) {
    uint32_t slot;
    {
      std::lock_guard lock{m};
      do
        slot = static_cast<uint32_t>(rng() % slots);
      while (!busy.insert(slot).second);
    }
    page_job job;
    job.op = op;
    job.tag = worker;
    job.pages.push_back({worker, slot, bench_hash(slot), 0});
    store.submit(std::move(job), [&, worker, slot](job_result r) {
      if (r.error)
        ++failed;
      bool again;
      {
        std::lock_guard lock{m};
        busy.erase(slot);
        ++done;
        again = !stop.load(std::memory_order_relaxed);
        if (!again && --running == 0)
          cv.notify_all();
      }
      if (again)
        start(worker);
    });
  };
  auto t0 = std::chrono::steady_clock::now();
  for (uint32_t w = 0; w < qd; ++w)
    start(w);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  std::unique_lock lock{m};
  cv.wait(lock, [&] { return running == 0; });
  load_result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.operations = done;
  r.errors = failed;
  r.iops = r.seconds > 0 ? static_cast<double>(done) / r.seconds : 0;
  r.mib_s = r.iops * static_cast<double>(store.geometry().block_bytes) / (1 << 20);
  r.mean_latency_us = r.iops > 0 ? qd / r.iops * 1e6 : 0;
  return r;
}

uint64_t fill_slots(slot_store& store) {
  const uint32_t slots = store.geometry().slots;
  const uint32_t dram = store.dram_slots();
  // Jobs of 8 pages, 4 jobs in flight: sequential, batched, enough queue depth.
  constexpr uint32_t per_job = 8;
  constexpr uint32_t jobs_in_flight = 4;
  std::mutex m;
  std::condition_variable cv;
  uint32_t outstanding = 0;
  uint64_t errors = 0;
  for (uint32_t first = 0; first < slots; first += per_job) {
    page_job job;
    job.op = page_op::write;
    for (uint32_t s = first; s < std::min(slots, first + per_job); ++s)
      job.pages.push_back({s % dram, s, bench_hash(s), 0});
    {
      std::unique_lock lock{m};
      cv.wait(lock, [&] { return outstanding < jobs_in_flight; });
      ++outstanding;
    }
    store.submit(std::move(job), [&](job_result r) {
      std::lock_guard lock{m};
      for (const auto& e : r.pages)
        errors += e ? 1 : 0;
      --outstanding;
      cv.notify_all();
    });
  }
  std::unique_lock lock{m};
  cv.wait(lock, [&] { return outstanding == 0; });
  return errors;
}

namespace {

// Longest measured point: a day. Also keeps sleep_for's conversion to
// nanoseconds far inside int64.
constexpr double max_seconds_per_point = 86'400;

// The largest page calibrate_nvme measures, and one slot of it on disk.
constexpr uint64_t large_block = 2 << 20;
constexpr uint64_t large_slot = large_block + sector_bytes;

caf::error check_calibration(const nvme_options& base, uint64_t file_bytes, double seconds) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, "calibration: " + std::move(what)); };
  if (!(seconds > 0) || !(seconds <= max_seconds_per_point))
    return bad(fmt::format("seconds per point must be in (0, {}], got {}", max_seconds_per_point, seconds));
  if (base.queue_depth == 0)
    return bad("queue depth must be at least 1, got 0");
  // Every point keeps queue_depth pages in flight on distinct slots.
  uint64_t needed = uint64_t{base.queue_depth} * large_slot;
  if (file_bytes < needed)
    return bad(fmt::format("a {} file holds {} slots of {}, fewer than the queue depth {}: it needs at least {} ({} B)",
                           format_bytes(file_bytes), file_bytes / large_slot, format_bytes(large_block),
                           base.queue_depth, format_bytes(needed), needed));
  if (file_bytes / (4096 + sector_bytes) > std::numeric_limits<uint32_t>::max())
    return bad(
        fmt::format("a {} file holds more than 2^32 slots of 4 KiB; use a smaller one", format_bytes(file_bytes)));
  return {};
}

} // namespace

caf::expected<nvme_profile> calibrate_nvme(const nvme_options& base, const std::string& dir, uint64_t file_bytes,
                                           double seconds) {
  if (auto err = check_calibration(base, file_bytes, seconds))
    return err;
  nvme_profile out;
  out.queue_depth = base.queue_depth;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::io_failure, fmt::format("calibration: cannot create {}: {}", dir, ec.message()));
  struct point {
    uint64_t block;
    uint32_t qd;
  };
  for (point p : {point{4096, 1}, point{4096, base.queue_depth}, point{large_block, base.queue_depth}}) {
    nvme_options o = base;
    o.file = dir + "/calibrate.slots";
    std::filesystem::remove(o.file, ec); // a leftover of an interrupted run; open() reports what matters
    tier_layout layout{slot_order::block_major, p.qd, 1, p.block};
    void* mem = nullptr;
    if (posix_memalign(&mem, sector_bytes, layout.total_bytes()) != 0)
      return make_error(errc::no_capacity, "calibration: no memory for the DRAM buffers");
    std::unique_ptr<void, decltype(&std::free)> dram{mem, &std::free};
    std::memset(mem, 0x5a, layout.total_bytes());
    auto store = slot_store::open(o, static_cast<uint32_t>(file_bytes / (p.block + sector_bytes)),
                                  {static_cast<std::byte*>(mem), layout});
    if (!store)
      return std::move(store.error());
    if (fill_slots(**store) != 0)
      return make_error(errc::io_failure, "calibration: writes failed while filling the slot file");
    auto r = run_random_load(**store, page_op::read, p.qd, seconds, 1);
    auto w = run_random_load(**store, page_op::write, p.qd, seconds, 2);
    if (r.errors + w.errors != 0)
      return make_error(errc::io_failure, "calibration: " + std::to_string(r.errors + w.errors) + " requests failed");
    if (p.block == 4096 && p.qd == 1) {
      out.latency_us = r.mean_latency_us;
    } else if (p.block == 4096) {
      out.read_iops = r.iops;
      out.write_iops = w.iops;
    } else {
      out.read_gbps = r.mib_s * (1 << 20) / 1e9;
      out.write_gbps = w.mib_s * (1 << 20) / 1e9;
    }
    store->reset();
    std::filesystem::remove(o.file, ec);
  }
  return out;
}

} // namespace kvtier::io
