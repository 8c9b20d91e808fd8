#include "remote/redis_block_store.hpp"

#include "runtime/error.hpp"
#include "runtime/worker_queue.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <xxhash.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>

namespace kvtier::remote {
namespace {

constexpr uint64_t value_magic = 0x314b4c4252545650; // "PVTRBLK1", little-endian

struct value_header {
  uint64_t magic = value_magic;
  uint64_t hash_lo = 0;
  uint64_t hash_hi = 0;
  uint64_t salt_id = 0;
  uint64_t payload_word = 0; // payload bytes, and the payload's encoding in the top byte
  uint64_t payload_checksum = 0;
};
static_assert(sizeof(value_header) == 48);

constexpr int encoding_shift = 56; // payload lengths stay far below 2^56
uint64_t payload_word(uint64_t bytes, uint8_t encoding) {
  return bytes | uint64_t{encoding} << encoding_shift;
}

uint64_t checksum(const std::byte* p, uint64_t n, const block_hash& h, uint64_t salt) {
  return XXH3_64bits_withSeed(p, n, h.lo ^ salt);
}

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

timeval timeval_of(uint32_t ms) {
  return {static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

caf::expected<context_ptr> open_context(const redis_options& o) {
  auto connect_tv = timeval_of(o.connect_timeout_ms);
  context_ptr c{o.unix_socket.empty() ? redisConnectWithTimeout(o.host.c_str(), o.port, connect_tv)
                                      : redisConnectUnixWithTimeout(o.unix_socket.c_str(), connect_tv)};
  if (!c)
    return make_error(errc::io_failure, fmt::format("redis {}: cannot allocate a connection", o.where()));
  if (c->err)
    return make_error(errc::io_failure, fmt::format("redis {}: {}", o.where(), c->errstr));
  redisSetTimeout(c.get(), timeval_of(o.timeout_ms));
  return c;
}

// PREFIX<salt hex>:<hi 16 hex><lo 16 hex>, as key_of writes it.
std::optional<stored_block> parse_key(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix))
    return std::nullopt;
  key.remove_prefix(prefix.size());
  auto colon = key.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 16 || key.size() != colon + 1 + 32)
    return std::nullopt;
  auto hex = [](std::string_view text, uint64_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
    return ec == std::errc{} && end == text.data() + text.size();
  };
  stored_block b;
  if (!hex(key.substr(0, colon), b.salt_id) || !hex(key.substr(colon + 1, 16), b.hash.hi) ||
      !hex(key.substr(colon + 17, 16), b.hash.lo))
    return std::nullopt;
  return b;
}

// hiredis writes with write(2): a server that went away would raise SIGPIPE
// and end the process. The store's thread keeps it blocked, so a write to a
// dead server fails with EPIPE instead, and the job with it.
bool block_sigpipe_on_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0;
}

struct queued_job {
  page_job job;
  io::job_callback done;
};

} // namespace

struct redis_block_store::impl {
  impl(const redis_options& o, io::dram_region r, context_ptr c)
      : options(o), region(r), context(std::move(c)), queue(1, [this](queued_job& j) { run(j); }) {}

  void run(queued_job& q) {
    static thread_local bool sigpipe_blocked = block_sigpipe_on_this_thread();
    (void)sigpipe_blocked;
    auto start = std::chrono::steady_clock::now();
    io::job_result result;
    result.tag = q.job.tag;
    result.pages.resize(q.job.pages.size());
    bool write = q.job.op == page_op::write;
    std::vector<bool> unreachable(q.job.pages.size(), true); // pages the server never answered
    if (!context || context->err) {
      auto c = open_context(options);
      context = c ? std::move(*c) : nullptr;
      if (!c)
        for (auto& e : result.pages)
          e = c.error();
    }
    const uint64_t B = region.layout.block_bytes();
    if (context) {
      // Pipelined: every command goes out before the first reply is read.
      std::vector<std::byte> value;
      for (const auto& p : q.job.pages) {
        auto key = key_of(p.hash, p.salt_id);
        const std::byte* payload = region.base + region.layout.offset(p.dram_slot, 0);
        if (write) {
          value_header h{value_magic,
                         p.hash.lo,
                         p.hash.hi,
                         p.salt_id,
                         payload_word(B, options.payload_encoding),
                         checksum(payload, B, p.hash, p.salt_id)};
          value.resize(sizeof h + B);
          std::memcpy(value.data(), &h, sizeof h);
          std::memcpy(value.data() + sizeof h, payload, B);
          redisAppendCommand(context.get(), "SET %b %b", key.data(), key.size(), value.data(), value.size());
        } else {
          redisAppendCommand(context.get(), "GET %b", key.data(), key.size());
        }
      }
      for (size_t i = 0; i < q.job.pages.size(); ++i) {
        const auto& p = q.job.pages[i];
        void* raw = nullptr;
        if (context->err || redisGetReply(context.get(), &raw) != REDIS_OK) {
          result.pages[i] = make_error(errc::io_failure, fmt::format("redis: {}", context->errstr));
          continue;
        }
        reply_ptr reply{static_cast<redisReply*>(raw)};
        unreachable[i] = false;
        result.pages[i] = write ? check_write(*reply) : check_read(*reply, p, B);
      }
    }
    uint64_t ok = 0;
    {
      std::lock_guard lock(mutex);
      for (auto& e : result.pages) {
        if (!e) {
          ++ok;
          continue;
        }
        if (!result.error)
          result.error = e;
        if (write)
          ++faults.failed_writes;
        else if (unreachable[&e - result.pages.data()])
          ++faults.failed_reads;
      }
      auto& c = write ? writes : reads;
      c.bytes += ok * B;
      c.operations += q.job.pages.size();
      c.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    result.bytes = ok * B;
    q.done(std::move(result));
  }

  caf::error check_write(const redisReply& r) {
    if (r.type == REDIS_REPLY_STATUS)
      return {};
    return make_error(
        errc::io_failure,
        fmt::format("redis SET: {}", r.type == REDIS_REPLY_ERROR ? std::string(r.str, r.len) : "refused"));
  }

  caf::error check_read(const redisReply& r, const page_transfer& p, uint64_t B) {
    auto err = check_value(r, p, B);
    if (is(err, errc::corrupted)) {
      std::lock_guard lock(mutex);
      ++faults.corrupted_reads;
    }
    return err;
  }

  caf::error check_value(const redisReply& r, const page_transfer& p, uint64_t B) {
    if (r.type == REDIS_REPLY_NIL) {
      std::lock_guard lock(mutex);
      ++faults.missing_reads;
      return make_error(errc::io_failure, "redis GET: the block is not in the remote store");
    }
    if (r.type != REDIS_REPLY_STRING) {
      std::lock_guard lock(mutex);
      ++faults.failed_reads;
      return make_error(
          errc::io_failure,
          fmt::format("redis GET: {}", r.type == REDIS_REPLY_ERROR ? std::string(r.str, r.len) : "no value"));
    }
    value_header h;
    if (r.len != sizeof h + B)
      return make_error(errc::corrupted,
                        fmt::format("redis GET: a value of {} bytes, expected {}", r.len, sizeof h + B));
    std::memcpy(&h, r.str, sizeof h);
    auto* payload = reinterpret_cast<const std::byte*>(r.str) + sizeof h;
    if (h.magic != value_magic || h.hash_lo != p.hash.lo || h.hash_hi != p.hash.hi || h.salt_id != p.salt_id ||
        (h.payload_word & ((uint64_t{1} << encoding_shift) - 1)) != B)
      return make_error(errc::corrupted, "redis GET: the value's header names another block");
    if (const auto encoding = uint8_t(h.payload_word >> encoding_shift); encoding != options.payload_encoding) {
      std::lock_guard lock(mutex);
      ++faults.foreign_encoding_reads;
      return make_error(errc::io_failure,
                        fmt::format("redis GET: the block was written in payload encoding {}, this run reads {} "
                                    "(another [compression] offload_dtype; use another [remote] key_prefix per "
                                    "encoding to keep both)",
                                    encoding, options.payload_encoding));
    }
    if (checksum(payload, B, p.hash, p.salt_id) != h.payload_checksum)
      return make_error(errc::corrupted, "redis GET: the block failed its checksum");
    std::memcpy(region.base + region.layout.offset(p.dram_slot, 0), payload, B);
    return {};
  }

  std::string key_of(const block_hash& h, uint64_t salt) const {
    return fmt::format("{}{:x}:{:016x}{:016x}", options.key_prefix, salt, h.hi, h.lo);
  }

  redis_options options;
  io::dram_region region;
  context_ptr context; // the worker thread's only
  mutable std::mutex mutex;
  link_counters reads, writes;
  remote_faults faults;
  worker_queue<queued_job> queue; // last: its thread stops before the rest goes
};

caf::expected<std::unique_ptr<redis_block_store>> redis_block_store::connect(const redis_options& options,
                                                                             io::dram_region region) {
  if (region.layout.order != slot_order::block_major || region.base == nullptr)
    return make_error(errc::invalid_argument, "redis_block_store: expected a block-major DRAM region");
  auto c = open_context(options);
  if (!c)
    return std::move(c.error());
  reply_ptr pong{static_cast<redisReply*>(redisCommand(c->get(), "PING"))};
  if (!pong || pong->type == REDIS_REPLY_ERROR)
    return make_error(
        errc::io_failure,
        fmt::format("redis {}: PING failed{}", options.where(), pong ? ": " + std::string(pong->str, pong->len) : ""));
  return std::unique_ptr<redis_block_store>(
      new redis_block_store(std::make_unique<impl>(options, region, std::move(*c))));
}

redis_block_store::redis_block_store(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}

redis_block_store::~redis_block_store() {
  impl_->queue.close();
}

void redis_block_store::submit(page_job job, io::job_callback done) {
  impl_->queue.push({std::move(job), std::move(done)});
}

void redis_block_store::drain() {
  impl_->queue.drain();
}

link_counters redis_block_store::read_counters() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->reads;
}

link_counters redis_block_store::write_counters() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->writes;
}

remote_faults redis_block_store::faults() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->faults;
}

caf::expected<std::vector<stored_block>> redis_block_store::list_blocks(uint64_t limit) const {
  if (limit == 0)
    return std::vector<stored_block>{};
  auto c = open_context(impl_->options);
  if (!c)
    return std::move(c.error());
  std::vector<stored_block> found;
  std::string pattern = impl_->options.key_prefix + "*";
  std::string cursor = "0";
  do {
    reply_ptr r{static_cast<redisReply*>(
        redisCommand(c->get(), "SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size()))};
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY)
      return make_error(errc::io_failure,
                        fmt::format("redis {}: SCAN failed{}", impl_->options.where(),
                                    (*c)->err ? std::string(": ") + (*c)->errstr : ""));
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const auto& keys = *r->element[1];
    for (size_t i = 0; i < keys.elements && found.size() < limit; ++i)
      if (keys.element[i]->type == REDIS_REPLY_STRING)
        if (auto b = parse_key({keys.element[i]->str, keys.element[i]->len}, impl_->options.key_prefix))
          found.push_back(*b);
  } while (cursor != "0" && found.size() < limit);
  return found;
}

std::string redis_options::where() const {
  return unix_socket.empty() ? fmt::format("{}:{}", host, port) : unix_socket;
}

std::string redis_block_store::key_of(const block_hash& hash, uint64_t salt_id) const {
  return impl_->key_of(hash, salt_id);
}

} // namespace kvtier::remote
