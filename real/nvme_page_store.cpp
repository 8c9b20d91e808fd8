#include "real/nvme_page_store.hpp"

#include <caf/send.hpp>

namespace kvtier {

caf::expected<std::unique_ptr<nvme_page_store>> nvme_page_store::open(const io::nvme_options& options,
                                                                      uint32_t nvme_slots, io::dram_region region) {
  auto store = io::slot_store::open(options, nvme_slots, region);
  if (!store)
    return std::move(store.error());
  return std::make_unique<nvme_page_store>(std::move(*store));
}

void nvme_page_store::submit(page_job job, caf::actor notify) {
  store_->submit(std::move(job), [notify = std::move(notify)](io::job_result r) {
    caf::anon_send(notify, completion_atom::value, r.tag, r.bytes, std::move(r.error));
  });
}

} // namespace kvtier
