#pragma once
// A page_file that injects faults into another one: the fault-injection
// decorator of the NVMe tier (LevelDB's fault_injection_test.cc idea). It
// sits under slot_store so injected faults travel the same checksum, retry
// and timeout paths as real ones.
//
// Faults (a rule counts the requests it matches -- its direction and, when
// set, its file offset -- and fires on numbers first .. first+count-1):
//   eio, enospc   the request fails with -EIO / -ENOSPC and never reaches the device
//   short_io      the request runs, its result claims half the bytes
//   corrupt       reads: one payload byte is flipped after the device read it
//                 (bus or media corruption); writes: one header byte is flipped
//                 before it is written (a torn header on disk)
//   slow          the completion is delayed by delay_ms
//   lost          the request runs, its completion is swallowed (until release_lost())

#include "io/page_file.hpp"
#include "runtime/mutex.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <vector>

namespace kvtier::io {

enum class fault : uint8_t { eio, enospc, short_io, corrupt, slow, lost };

struct fault_rule {
  fault kind = fault::eio;
  io_dir dir = io_dir::write;
  uint64_t first = 0;             // 0-based index among the requests this rule matches
  uint64_t count = 1;             // how many consecutive requests; ~0 = forever
  uint32_t delay_ms = 0;          // slow only
  uint64_t offset = ~uint64_t{0}; // match only requests at this header or payload offset (slot_geometry); ~0 = any
};

class faulty_page_file final : public page_file {
public:
  faulty_page_file(std::unique_ptr<page_file> inner, std::vector<fault_rule> rules);
  ~faulty_page_file() override;

  std::string describe() const override;
  void set_callback(raw_callback cb) override;
  void submit(std::span<const raw_io> batch) override;

  /// Faults injected so far.
  uint64_t injected() const;
  /// Delivers swallowed completions now (as a very late device would).
  void release_lost();

private:
  struct pending {
    std::chrono::steady_clock::time_point due;
    uint64_t id;
    int64_t result;
  };
  const fault_rule* match(const raw_io& r) REQUIRES(mutex_);
  void on_inner(uint64_t id, int64_t result);
  void defer(std::chrono::milliseconds delay, uint64_t id, int64_t result);
  void deliver();

  std::unique_ptr<page_file> inner_;
  std::vector<fault_rule> rules_; // Constant after construction.
  raw_callback callback_;
  mutable kvtier::mutex mutex_;
  std::condition_variable wake_;
  std::vector<uint64_t> seen_ GUARDED_BY(mutex_); // requests each rule matched
  uint64_t injected_ GUARDED_BY(mutex_) = 0;
  std::map<uint64_t, const fault_rule*> armed_ GUARDED_BY(mutex_); // id -> fault to apply on completion
  std::map<uint64_t, std::byte*> payloads_ GUARDED_BY(mutex_);     // id -> payload, for read corruption
  std::map<uint64_t, uint64_t> sizes_ GUARDED_BY(mutex_);
  std::vector<pending> deferred_ GUARDED_BY(mutex_);
  std::vector<std::pair<uint64_t, int64_t>> lost_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread deliverer_;
};

} // namespace kvtier::io
