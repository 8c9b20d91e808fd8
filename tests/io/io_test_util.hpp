#pragma once
// Helpers for the NVMe tier's tests: a temp dir that cleans up, an aligned
// DRAM pool, deterministic block contents, and a blocking submit.

#include "io/slot_store.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

namespace kvtier::io::test {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kvtier-io-XXXXXX";
    path = ::mkdtemp(pattern.data());
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name = "kvtier.slots") const { return (path / name).string(); }
};

/// A block-major DRAM pool of `slots` blocks of `layers` x `layer_bytes`, 4 KiB aligned.
struct dram_pool {
  std::unique_ptr<std::byte, void (*)(void*)> mem{nullptr, &std::free};
  tier_layout layout;
  dram_pool(uint32_t slots, uint32_t layers, uint64_t layer_bytes) {
    layout = {slot_order::block_major, slots, layers, layer_bytes};
    void* p = nullptr;
    if (posix_memalign(&p, 4096, layout.total_bytes()) == 0)
      mem.reset(static_cast<std::byte*>(p));
    std::memset(p, 0, layout.total_bytes());
  }
  dram_region region() const { return {mem.get(), layout}; }
  std::byte* slot(uint32_t s) const { return mem.get() + layout.offset(s, 0); }
  uint64_t block_bytes() const { return layout.block_bytes(); }
  uint64_t checksum(uint32_t s) const { return XXH3_64bits(slot(s), block_bytes()); }
};

/// Content of block `id` in version `version`: every byte depends on both.
inline void fill_block(std::byte* out, uint64_t bytes, uint64_t id, uint64_t version = 0) {
  uint64_t x = id * 0x9E3779B97F4A7C15ull + version * 0xD1B54A32D192ED03ull + 1;
  for (uint64_t i = 0; i < bytes; i += 8) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    std::memcpy(out + i, &x, std::min<uint64_t>(8, bytes - i));
  }
}

inline block_hash hash_of(uint64_t id, uint64_t version = 0) {
  return {id * 2654435761ull + version + 1, (id << 8) ^ (version + 7)};
}

/// The engine set-ups every store test runs on.
/// io_uring adjacent (fixed-buffer reads, WRITEV writes), io_uring split with
/// registered buffers, io_uring split without, threads adjacent, threads split.
enum class test_mode { uring, uring_split_fixed, uring_split_plain, threads, threads_split };

inline bool is_split(test_mode m) {
  return m == test_mode::uring_split_fixed || m == test_mode::uring_split_plain || m == test_mode::threads_split;
}
inline bool is_threads(test_mode m) {
  return m == test_mode::threads || m == test_mode::threads_split;
}

inline void apply(test_mode m, nvme_options& o) {
  o.engine = is_threads(m) ? engine_choice::threads : engine_choice::uring;
  o.large_block_bytes = is_split(m) ? 0 : uint64_t{1} << 30; // every test block is small or large by mode
  o.register_buffers = m != test_mode::uring_split_plain;
}

inline const auto all_modes =
    ::testing::Values(test_mode::uring, test_mode::uring_split_fixed, test_mode::uring_split_plain, test_mode::threads,
                      test_mode::threads_split);

inline std::string mode_name(const ::testing::TestParamInfo<test_mode>& info) {
  switch (info.param) {
    case test_mode::uring:
      return "io_uring";
    case test_mode::uring_split_fixed:
      return "io_uring_split_fixed";
    case test_mode::uring_split_plain:
      return "io_uring_split";
    case test_mode::threads:
      return "threads";
    case test_mode::threads_split:
      return "threads_split";
  }
  return "?";
}

inline job_result run(slot_store& store, page_job job) {
  std::promise<job_result> p;
  auto f = p.get_future();
  store.submit(std::move(job), [&p](job_result r) { p.set_value(std::move(r)); });
  return f.get();
}

inline page_job make_job(page_op op, uint64_t tag, std::vector<page_transfer> pages) {
  page_job j;
  j.op = op;
  j.tag = tag;
  j.pages = std::move(pages);
  return j;
}

} // namespace kvtier::io::test
