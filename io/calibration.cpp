#include "io/calibration.hpp"

#include "runtime/error.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
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
  r.iops = static_cast<double>(done) / r.seconds;
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

caf::expected<nvme_profile> calibrate_nvme(const nvme_options& base, const std::string& dir, uint64_t file_bytes,
                                           double seconds) {
  nvme_profile out;
  out.queue_depth = base.queue_depth;
  std::filesystem::create_directories(dir);
  struct point {
    uint64_t block;
    uint32_t qd;
  };
  for (point p : {point{4096, 1}, point{4096, base.queue_depth}, point{2 << 20, base.queue_depth}}) {
    nvme_options o = base;
    o.file = dir + "/calibrate.slots";
    std::filesystem::remove(o.file);
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
    std::filesystem::remove(o.file);
  }
  return out;
}

} // namespace kvtier::io
