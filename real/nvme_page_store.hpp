#pragma once
// The real backend's page_store (actors/seam.hpp): slot_store behind the
// seam. Each job's completion reaches `notify` as
//   (completion_atom, tag, payload bytes moved, caf::error)
// sent from the engine's completion thread. A read job with any failed page
// reports that page's error (errc::corrupted or errc::io_failure): the caller
// treats the whole job as a miss and recomputes. recovered_blocks() lists
// what an earlier run left in the slot file, for the block manager to adopt.

#include "io/slot_store.hpp"
#include "actors/seam.hpp"

#include <memory>

namespace kvtier {

class nvme_page_store final : public page_store {
public:
  explicit nvme_page_store(std::unique_ptr<io::slot_store> store) : store_(std::move(store)) {}

  /// Opens the slot file `options.file` for `nvme_slots` blocks of the DRAM
  /// region's block size (see slot_store::open).
  static caf::expected<std::unique_ptr<nvme_page_store>> open(const io::nvme_options& options, uint32_t nvme_slots,
                                                              io::dram_region region);

  void submit(page_job job, caf::actor notify) override;
  link_counters read_counters() const override { return store_->read_counters(); }
  link_counters write_counters() const override { return store_->write_counters(); }

  /// Blocks found on disk at open (slot_store::recovered_blocks).
  std::vector<recovered_block> recovered_blocks() const override { return store_->recovered_blocks(); }
  /// What open found and did, for the log.
  const io::open_report& report() const { return store_->report(); }
  io::slot_store& store() { return *store_; }

private:
  std::unique_ptr<io::slot_store> store_;
};

} // namespace kvtier
