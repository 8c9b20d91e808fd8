#include "client/client.hpp"

#include "client/connection.hpp"
#include "client/wire.hpp"

namespace kvtier::client {

const char* to_string(errc code) {
  switch (code) {
    case errc::ok:
      return "ok";
    case errc::unreachable:
      return "unreachable";
    case errc::refused:
      return "refused";
    case errc::protocol:
      return "protocol";
    case errc::bad_request:
      return "bad_request";
    case errc::quota_exceeded:
      return "quota_exceeded";
    case errc::closed:
      return "closed";
    case errc::system:
      return "system";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

namespace {

wire::request batch(wire::op kind, std::span<const block_key> keys, std::span<const std::uint64_t> offsets = {}) {
  wire::request q;
  q.kind = kind;
  q.keys.assign(keys.begin(), keys.end());
  q.offsets.assign(offsets.begin(), offsets.end());
  return q;
}

result<std::uint32_t> read_count(const wire::reply& r) {
  wire::reader in(r.body);
  std::uint32_t n = 0;
  if (!in.u32(n) || !in.done())
    return error{errc::protocol, "malformed reply body"};
  return n;
}

result<std::vector<bool>> read_flags(const wire::reply& r, std::size_t expected) {
  wire::reader in(r.body);
  std::uint32_t n = 0;
  if (!in.u32(n) || n != expected || in.left() != n)
    return error{errc::protocol, "malformed reply body"};
  std::vector<bool> out(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint8_t f = 0;
    in.u8(f);
    out[i] = f != 0;
  }
  return out;
}

} // namespace

client::client(std::unique_ptr<connection> conn) : conn_(std::move(conn)) {
}
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() = default;

result<client> client::connect(const std::string& endpoint, const std::string& tenant, const std::string& token) {
  return connect(connect_options{endpoint, tenant, token});
}

result<client> client::connect(const connect_options& options) {
  if (options.tenant.size() > wire::max_name_bytes || options.token.size() > wire::max_name_bytes)
    return error{errc::bad_request, "tenant and token are at most 255 bytes"};
  auto conn = connection::open(options.endpoint, options.timeout_ms);
  if (!conn)
    return conn.err();
  wire::request hello;
  hello.kind = wire::op::hello;
  hello.tenant = options.tenant;
  hello.token = options.token;
  auto r = (*conn)->call(std::move(hello));
  if (!r)
    return r.err();
  wire::reader in(r->body);
  std::uint64_t block_bytes = 0;
  std::uint32_t max_batch = 0;
  if (!in.u64(block_bytes) || !in.u32(max_batch) || !in.done() || block_bytes == 0)
    return error{errc::protocol, "malformed hello reply"};
  (*conn)->block_bytes = block_bytes;
  return client(std::move(*conn));
}

std::uint64_t client::block_bytes() const {
  return conn_->block_bytes;
}

result<region*> client::map_region(std::size_t bytes) {
  auto made = conn_->is_unix() ? region::create(bytes) : region::create_named(bytes);
  if (!made)
    return made.err();
  wire::request q;
  q.kind = wire::op::map_region;
  q.region_bytes = made->size();
  q.shm_name = made->shm_name();
  auto r = conn_->call(std::move(q), conn_->is_unix() ? made->fd() : -1);
  if (!r)
    return r.err();
  conn_->mapped = std::make_unique<region>(std::move(*made));
  return conn_->mapped.get();
}

region* client::mapped_region() {
  return conn_->mapped.get();
}

result<std::size_t> client::batch_exists(std::span<const block_key> keys) {
  auto r = conn_->call(batch(wire::op::exists, keys));
  if (!r)
    return r.err();
  auto n = read_count(*r);
  if (!n)
    return n.err();
  return std::size_t{*n};
}

result<std::vector<bool>> client::batch_get(std::span<const block_key> keys, std::span<const std::uint64_t> offsets) {
  if (keys.size() != offsets.size())
    return error{errc::bad_request, "batch_get: as many offsets as keys"};
  auto r = conn_->call(batch(wire::op::get, keys, offsets));
  if (!r)
    return r.err();
  return read_flags(*r, keys.size());
}

result<std::vector<bool>> client::batch_set(std::span<const block_key> keys, std::span<const std::uint64_t> offsets) {
  if (keys.size() != offsets.size())
    return error{errc::bad_request, "batch_set: as many offsets as keys"};
  auto r = conn_->call(batch(wire::op::set, keys, offsets));
  if (!r)
    return r.err();
  return read_flags(*r, keys.size());
}

result<std::size_t> client::pin(std::span<const block_key> keys) {
  auto r = conn_->call(batch(wire::op::pin, keys));
  if (!r)
    return r.err();
  auto n = read_count(*r);
  if (!n)
    return n.err();
  return std::size_t{*n};
}

result<std::size_t> client::release(std::span<const block_key> keys) {
  auto r = conn_->call(batch(wire::op::release, keys));
  if (!r)
    return r.err();
  auto n = read_count(*r);
  if (!n)
    return n.err();
  return std::size_t{*n};
}

result<daemon_stats> client::stats() {
  wire::request q;
  q.kind = wire::op::stats;
  auto r = conn_->call(std::move(q));
  if (!r)
    return r.err();
  daemon_stats s;
  wire::reader in(r->body);
  std::uint64_t* fields[] = {&s.block_bytes, &s.tenant_blocks,        &s.tenant_quota_blocks, &s.tenant_pinned,
                             &s.tenant_hits, &s.tenant_misses,        &s.dram_blocks,         &s.dram_capacity_blocks,
                             &s.nvme_blocks, &s.nvme_capacity_blocks, &s.evictions,           &s.sessions};
  for (auto* f : fields)
    if (!in.u64(*f))
      return error{errc::protocol, "malformed stats reply"};
  return s;
}

} // namespace kvtier::client
