#pragma once
// The real backend's remote tier (L4) behind the page-store seam
// (actors/seam.hpp): remote/'s Redis block store in the place of the NVMe
// store below DRAM. The block manager addresses the tier by slot like any
// other; the store ignores the slot and keys each block by its salted hash,
// so a block's value outlives the slot (and the process) that wrote it.
//
// Each job's completion reaches `notify` as
//   (completion_atom, tag, payload bytes moved, caf::error)
// from the store's thread. Fault handling is the NVMe tier's: a read with a
// missing, damaged or unreachable page reports that page's error and the
// block manager treats the job as a miss (counted; the blocks are
// recomputed); a failed write leaves the block uncached below DRAM.
//
// recovered_blocks() lists, once, the blocks the server already held when the
// store opened (another kvtier process's, or an earlier run's), in slots
// 0..n-1 of the tier, at most the tier's capacity: the block manager adopts
// them so that prefix lookup finds them, which is how one process serves
// another's prefixes.

#include "actors/seam.hpp"
#include "remote/redis_block_store.hpp"
#include "runtime/remote_config.hpp"

#include <memory>

namespace kvtier {

class remote_page_store final : public page_store {
public:
  /// Connects (a located error when the server cannot be reached) and lists
  /// what it holds, at most `slots` blocks. `payload_encoding` is what this
  /// run's block bytes are (redis_options::payload_encoding).
  static caf::expected<std::unique_ptr<remote_page_store>> open(const remote_config& options, uint32_t slots,
                                                                io::dram_region region, uint8_t payload_encoding = 0);

  void submit(page_job job, caf::actor notify) override;
  link_counters read_counters() const override { return store_->read_counters(); }
  link_counters write_counters() const override { return store_->write_counters(); }
  std::vector<recovered_block> recovered_blocks() const override { return found_; }

  remote::remote_faults faults() const { return store_->faults(); }
  /// "redis 127.0.0.1:6379", for the report.
  std::string where() const { return "redis " + options_.where(); }

private:
  remote_page_store(std::unique_ptr<remote::redis_block_store> store, remote::redis_options options,
                    std::vector<recovered_block> found)
      : store_(std::move(store)), options_(std::move(options)), found_(std::move(found)) {}
  std::unique_ptr<remote::redis_block_store> store_;
  remote::redis_options options_;
  std::vector<recovered_block> found_;
};

} // namespace kvtier
