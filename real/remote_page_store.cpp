#include "real/remote_page_store.hpp"

#include <caf/send.hpp>

namespace kvtier {

caf::expected<std::unique_ptr<remote_page_store>>
remote_page_store::open(const remote_config& c, uint32_t slots, io::dram_region region, uint8_t payload_encoding) {
  remote::redis_options o;
  o.host = c.host;
  o.port = static_cast<uint16_t>(c.port);
  o.unix_socket = c.unix_socket;
  o.key_prefix = c.key_prefix;
  o.timeout_ms = c.command_timeout_ms;
  o.connect_timeout_ms = c.connect_timeout_ms;
  o.payload_encoding = payload_encoding;
  auto store = remote::redis_block_store::connect(o, region);
  if (!store)
    return std::move(store.error());
  auto listed = (*store)->list_blocks(slots);
  if (!listed)
    return std::move(listed.error());
  std::vector<recovered_block> found;
  found.reserve(listed->size());
  for (const auto& b : *listed)
    found.push_back({static_cast<uint32_t>(found.size()), b.hash, b.salt_id});
  return std::unique_ptr<remote_page_store>(new remote_page_store(std::move(*store), o, std::move(found)));
}

void remote_page_store::submit(page_job job, caf::actor notify) {
  store_->submit(std::move(job), [notify = std::move(notify)](io::job_result r) {
    caf::anon_send(notify, completion_atom::value, r.tag, r.bytes, std::move(r.error));
  });
}

} // namespace kvtier
