#include "node/node_actor.hpp"

#include "node/standin_compute.hpp"
#include "remote/redis_block_store.hpp"
#include "runtime/error.hpp"

#include <caf/actor_cast.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/send.hpp>
#include <caf/typed_response_promise.hpp>
#include <xxhash.h>

#include <chrono>
#include <functional>
#include <unordered_map>

// The remote store's completions, handed from its thread to the actor that
// submitted the job; they never leave the process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::io::job_result)

namespace kvtier::node {

namespace {

using remote_done_atom = caf::atom_constant<caf::atom("rdone")>;
using compute_atom = caf::atom_constant<caf::atom("compute")>;
using step_atom = caf::atom_constant<caf::atom("step")>;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// XXH3-64 over the blocks' own XXH3-64s, in chain order: the same value on
// every node that holds the same bytes.
uint64_t kv_checksum(local_tier& tier, const std::vector<block_id>& slots) {
  std::vector<uint64_t> per_block;
  per_block.reserve(slots.size());
  for (auto id : slots) {
    auto b = tier.bytes(id);
    per_block.push_back(XXH3_64bits(b.data(), b.size()));
  }
  return XXH3_64bits(per_block.data(), per_block.size() * sizeof(uint64_t));
}

struct prefill_job {
  request req;
  std::vector<block_hash> chain;
  std::vector<block_id> slots;
  size_t computed = 0; // blocks computed (or found in the own tier)
  // Blocks computed while a write is in flight wait here and go out together
  // as the next write, pipelined: streaming without a round trip per block.
  std::vector<page_transfer> unsent;
  bool writing = false;
  uint64_t tokens = 0;
  uint64_t bytes_written = 0;
  int64_t start_ns = 0;
  caf::typed_response_promise<prefill_result> promise;
};

struct decode_job {
  request req;
  std::vector<uint32_t> sequence; // the prompt, then every token decoded so far (here or before)
  block_hash last_full;           // the hash of the sequence's last whole block (empty: none)
  std::vector<block_id> slots;
  decode_result result;
  caf::actor router;
  uint64_t token = 0;
  uint32_t step = 0;
  caf::typed_response_promise<decode_result> promise;
};

struct node_state {
  std::shared_ptr<node_core> core;
  caf::actor self_handle;
  uint64_t next_tag = 1;
  std::unordered_map<uint64_t, std::function<void(io::job_result)>> on_done; // by job tag
  std::unordered_map<uint64_t, prefill_job> prefills;                        // by request id
  std::unordered_map<uint64_t, decode_job> decodes;

  // Submits a job to the remote store; `then` runs on the actor when it completes.
  void submit(page_op op, std::vector<page_transfer> pages, std::function<void(io::job_result)> then) {
    auto tag = next_tag++;
    on_done.emplace(tag, std::move(then));
    page_job job{op, std::move(pages), tag};
    core->store->submit(std::move(job), [to = self_handle](io::job_result r) {
      caf::anon_send(to, remote_done_atom::value, std::move(r));
    });
  }

  void release(const std::vector<block_id>& slots) {
    for (auto id : slots)
      core->tier.release(id);
  }

  // Writes the blocks computed since the last write went out, unless one is in flight.
  void send_writes(uint64_t id) {
    auto& job = prefills.at(id);
    if (job.writing || job.unsent.empty())
      return;
    job.writing = true;
    auto pages = std::move(job.unsent);
    job.unsent.clear();
    auto blocks = pages.size();
    submit(page_op::write, std::move(pages), [this, id, blocks](io::job_result r) {
      auto it = prefills.find(id);
      if (it == prefills.end())
        return;
      auto& done = it->second;
      done.writing = false;
      if (r.error) {
        done.promise.deliver(make_error(errc::io_failure,
                                        "node " + core->config.name + ": the remote store refused a block of request " +
                                            std::to_string(id) + ": " + describe(r.error)));
        release(done.slots);
        prefills.erase(it);
        return;
      }
      core->stats.blocks_written += blocks;
      done.bytes_written += r.bytes;
      if (!done.unsent.empty())
        send_writes(id);
      else if (done.computed == done.chain.size())
        answer_prefill(it);
    });
  }

  // Every block is computed and its write acknowledged.
  void answer_prefill(std::unordered_map<uint64_t, prefill_job>::iterator it) {
    auto& job = it->second;
    prefill_result out;
    out.id = it->first;
    out.node = core->config.name;
    out.blocks = static_cast<uint32_t>(job.chain.size());
    out.tokens_computed = job.tokens;
    out.kv_checksum = kv_checksum(core->tier, job.slots);
    out.bytes_written = job.bytes_written;
    out.start_ns = job.start_ns;
    out.end_ns = now_ns();
    job.promise.deliver(std::move(out));
    release(job.slots);
    prefills.erase(it);
  }

  // A block of decoded tokens is whole: its KV goes to the store, and once
  // the store holds it the router learns the tokens decoded so far, so that
  // another node can resume from there. A checkpoint that finds no free slot
  // or fails its write is skipped; the next one still reports every token,
  // and a node that resumes after it recomputes the skipped block.
  void checkpoint(uint64_t id) {
    auto& job = decodes.at(id);
    auto& tier = core->tier;
    const auto B = core->config.block_tokens;
    std::span<const uint32_t> tokens(job.sequence.data() + job.sequence.size() - B, B);
    auto hash = hash_block(job.last_full, tokens, tenant_salt{job.req.salt});
    job.last_full = hash;
    auto slot = tier.allocate();
    if (!slot)
      return;
    fill_block(tier.bytes(*slot), hash);
    std::vector<uint32_t> decoded(job.sequence.begin() + static_cast<std::ptrdiff_t>(job.req.prompt.size()),
                                  job.sequence.end());
    submit(page_op::write, {{index_of(*slot), 0, hash, job.req.salt}},
           [this, id, slot = *slot, hash, decoded = std::move(decoded)](io::job_result r) {
             auto& own = core->tier;
             if (r.error) {
               own.discard(slot);
               return;
             }
             ++core->stats.blocks_written;
             // In the store now, as every block the tier holds; the decode
             // reads it no more, so its slot is free for others at once.
             own.publish(slot, hash);
             own.release(slot);
             auto it = decodes.find(id);
             if (it == decodes.end())
               return;
             ++it->second.result.blocks_checkpointed;
             if (it->second.router)
               caf::anon_send(it->second.router, decode_progress_atom::value, id, decoded);
           });
  }

  caf::error no_slot(uint64_t id) const {
    return make_error(errc::no_capacity,
                      "node " + core->config.name + ": request " + std::to_string(id) +
                          " needs more blocks than the node's " + std::to_string(core->config.dram_blocks) +
                          " free slots");
  }
};

} // namespace

node_core::node_core(node_config c, local_tier t, std::unique_ptr<remote::redis_block_store> s)
    : config(std::move(c)), tier(std::move(t)), store(std::move(s)) {
  stats.node = config.name;
  stats.role = std::string(to_string(config.role));
}

node_core::~node_core() = default;

caf::expected<std::shared_ptr<node_core>> open_node(const node_config& config) {
  local_tier tier(config.dram_blocks, config.block_bytes);
  remote::redis_options o;
  o.host = config.redis_host;
  o.port = config.redis_port;
  o.key_prefix = config.key_prefix;
  // Moving the tier into the core below keeps its byte vector's buffer, so
  // the region the store addresses stays valid.
  auto region = tier.region();
  auto store = remote::redis_block_store::connect(o, region);
  if (!store)
    return make_error(errc::io_failure,
                      "node " + config.name +
                          ": cannot reach the remote store ([node] redis): " + describe(store.error()));
  return std::make_shared<node_core>(config, std::move(tier), std::move(*store));
}

caf::behavior node_actor(caf::event_based_actor* self, std::shared_ptr<node_core> core) {
  auto st = std::make_shared<node_state>();
  st->core = std::move(core);
  st->self_handle = caf::actor_cast<caf::actor>(self);

  // One block of a prefill per message, so the actor answers others between
  // blocks and the modeled rate is a delay between them.
  auto compute_next = [self, st, &cfg = st->core->config, &stats = st->core->stats](uint64_t id) {
    auto it = st->prefills.find(id);
    if (it == st->prefills.end())
      return;
    auto& job = it->second;
    auto& tier = st->core->tier;
    auto i = job.computed;
    auto hash = job.chain[i];
    auto tokens = tokens_of_block(job.req.prompt.size(), cfg.block_tokens, i);
    auto id_local = tier.find(hash);
    if (id_local == invalid_block) {
      auto slot = tier.allocate();
      if (!slot) {
        job.promise.deliver(st->no_slot(id));
        st->release(job.slots);
        st->prefills.erase(it);
        return;
      }
      fill_block(tier.bytes(*slot), hash);
      tier.publish(*slot, hash);
      job.slots.push_back(*slot);
      job.tokens += tokens;
      stats.prefill_tokens_computed += tokens;
      job.unsent.push_back({index_of(*slot), 0, hash, job.req.salt});
      st->send_writes(id);
    } else {
      job.slots.push_back(id_local); // the own tier holds it: it was stored when computed or pulled
    }
    ++job.computed;
    if (job.computed < job.chain.size()) {
      if (cfg.prefill_tokens_per_s > 0)
        self->delayed_send(self,
                           std::chrono::nanoseconds(static_cast<int64_t>(tokens * 1e9 / cfg.prefill_tokens_per_s)),
                           compute_atom::value, id);
      else
        self->send(self, compute_atom::value, id);
    } else if (!job.writing && job.unsent.empty()) {
      st->answer_prefill(it);
    }
  };

  auto finish_decode = [st, &stats = st->core->stats](uint64_t id) {
    auto it = st->decodes.find(id);
    auto& job = it->second;
    job.result.output_checksum = job.token;
    job.result.end_ns = now_ns();
    stats.decode_tokens += job.req.decode_tokens - job.result.tokens_resumed;
    job.promise.deliver(job.result);
    st->release(job.slots);
    st->decodes.erase(it);
  };

  // Every block is in place: decoding starts.
  auto start_decode = [self, st, &cfg = st->core->config, finish_decode](uint64_t id) {
    auto& job = st->decodes.at(id);
    job.result.kv_checksum = kv_checksum(st->core->tier, job.slots);
    job.result.decode_start_ns = now_ns();
    // A resumed request goes on from its last decoded token: the same tokens
    // as if it had never moved.
    const auto& decoded = job.req.decoded;
    job.token = decoded.empty() ? job.result.kv_checksum : decoded.back();
    job.step = static_cast<uint32_t>(decoded.size());
    job.result.tokens_resumed = job.step;
    st->core->stats.tokens_resumed += job.step;
    if (job.router)
      self->send(job.router, decode_started_atom::value, id, cfg.name);
    if (job.step >= job.req.decode_tokens)
      return finish_decode(id);
    self->delayed_send(self, std::chrono::microseconds(cfg.decode_step_us), step_atom::value, id);
  };

  return {
      [st](remote_done_atom, io::job_result& r) {
        auto it = st->on_done.find(r.tag);
        if (it == st->on_done.end())
          return;
        auto then = std::move(it->second);
        st->on_done.erase(it);
        then(std::move(r));
      },
      [self, st, &cfg = st->core->config, &stats = st->core->stats,
       compute_next](prefill_atom, request& req) -> caf::result<prefill_result> {
        if (!prefills(cfg.role))
          return make_error(errc::invalid_argument,
                            "node " + cfg.name + " does not prefill (role " + std::string(to_string(cfg.role)) + ")");
        if (st->prefills.count(req.id) || req.prompt.empty())
          return make_error(errc::invalid_argument,
                            "node " + cfg.name + ": request " + std::to_string(req.id) +
                                (req.prompt.empty() ? " has an empty prompt" : " is already prefilling"));
        ++stats.requests;
        auto id = req.id;
        prefill_job job;
        job.start_ns = now_ns();
        job.chain = chain(req.prompt, cfg.block_tokens, req.salt);
        job.req = std::move(req);
        job.promise = self->make_response_promise<prefill_result>();
        auto promise = job.promise;
        st->prefills.emplace(id, std::move(job));
        compute_next(id);
        return promise;
      },
      [compute_next](compute_atom, uint64_t id) { compute_next(id); },
      [self, st, &cfg = st->core->config, &stats = st->core->stats,
       start_decode](decode_atom, request& req) -> caf::result<decode_result> {
        if (!decodes(cfg.role))
          return make_error(errc::invalid_argument,
                            "node " + cfg.name + " does not decode (role " + std::string(to_string(cfg.role)) + ")");
        if (st->decodes.count(req.id) || req.prompt.empty())
          return make_error(errc::invalid_argument,
                            "node " + cfg.name + ": request " + std::to_string(req.id) +
                                (req.prompt.empty() ? " has an empty prompt" : " is already decoding"));
        if (req.decoded.size() > req.decode_tokens)
          return make_error(errc::invalid_argument,
                            "node " + cfg.name + ": request " + std::to_string(req.id) + " resumes after " +
                                std::to_string(req.decoded.size()) + " decoded tokens; expected at most its " +
                                std::to_string(req.decode_tokens));
        // Resume after the last decoded token that ends one of this node's
        // blocks (a node of another block size checkpointed them); the rest
        // are decoded again.
        while (!req.decoded.empty() && (req.prompt.size() + req.decoded.size()) % cfg.block_tokens != 0)
          req.decoded.pop_back();
        ++stats.requests;
        auto& tier = st->core->tier;
        auto id = req.id;
        decode_job job;
        std::vector<uint32_t> sequence;
        std::vector<block_hash> hashes;
        std::vector<page_transfer> pulls;
        std::vector<size_t> pulled_index;
        // Takes a slot for every block of the prompt and the decoded tokens:
        // the tier's own, or a free one to pull into. False when they do not
        // fit; then every slot taken is given back.
        auto take_slots = [&] {
          sequence = req.prompt;
          sequence.insert(sequence.end(), req.decoded.begin(), req.decoded.end());
          hashes = chain(sequence, cfg.block_tokens, req.salt);
          job = decode_job{};
          pulls.clear();
          pulled_index.clear();
          for (size_t i = 0; i < hashes.size(); ++i) {
            auto local = tier.find(hashes[i]);
            if (local != invalid_block) {
              job.slots.push_back(local);
              ++job.result.blocks_local;
              continue;
            }
            auto slot = tier.allocate();
            if (!slot) {
              for (size_t k = 0, pulled = 0; k < job.slots.size(); ++k)
                if (pulled < pulled_index.size() && pulled_index[pulled] == k) {
                  tier.discard(job.slots[k]); // taken to pull into: nothing in it
                  ++pulled;
                } else {
                  tier.release(job.slots[k]); // the tier's own copy stays cached
                }
              return false;
            }
            job.slots.push_back(*slot);
            pulls.push_back({index_of(*slot), 0, hashes[i], req.salt});
            pulled_index.push_back(i);
          }
          return true;
        };
        if (!take_slots()) {
          if (req.decoded.empty())
            return st->no_slot(id);
          // The decoded tokens' blocks do not fit beside the prompt's: start
          // from the prompt alone and decode them again.
          req.decoded.clear();
          if (!take_slots())
            return st->no_slot(id);
        }
        job.result.id = id;
        job.result.node = cfg.name;
        job.result.pull_start_ns = now_ns();
        job.router = caf::actor_cast<caf::actor>(self->current_sender());
        stats.blocks_local += job.result.blocks_local;
        job.last_full = sequence.size() % cfg.block_tokens == 0 ? hashes.back()
            : hashes.size() >= 2                                ? hashes[hashes.size() - 2]
                                                                : block_hash{};
        job.sequence = std::move(sequence);
        job.req = std::move(req);
        job.promise = self->make_response_promise<decode_result>();
        auto promise = job.promise;
        st->decodes.emplace(id, std::move(job));
        if (pulls.empty()) {
          start_decode(id);
          return promise;
        }
        st->submit(page_op::read, pulls,
                   [st, &cfg = st->core->config, &stats = st->core->stats, id, hashes, pulled_index,
                    start_decode](io::job_result r) {
                     auto& pulling = st->decodes.at(id);
                     auto& own = st->core->tier;
                     for (size_t k = 0; k < pulled_index.size(); ++k) {
                       auto i = pulled_index[k];
                       auto slot = pulling.slots[i];
                       bool ok = k < r.pages.size() ? !r.pages[k] : !r.error;
                       if (ok) {
                         ++pulling.result.blocks_pulled;
                         pulling.result.bytes_pulled += own.bytes(slot).size();
                         ++stats.blocks_pulled;
                       } else {
                         // The store lost it (evicted, damaged, unreachable): a miss, recomputed here.
                         auto tokens = tokens_of_block(pulling.sequence.size(), cfg.block_tokens, i);
                         fill_block(own.bytes(slot), hashes[i]);
                         pulling.result.tokens_recomputed += tokens;
                         stats.tokens_recomputed += tokens;
                         ++stats.remote_misses;
                       }
                       own.publish(slot, hashes[i]);
                     }
                     start_decode(id);
                   });
        return promise;
      },
      [self, st, &cfg = st->core->config, finish_decode](step_atom, uint64_t id) {
        auto it = st->decodes.find(id);
        if (it == st->decodes.end())
          return;
        auto& job = it->second;
        job.token = next_token(job.token, job.step);
        job.sequence.push_back(static_cast<uint32_t>(job.token));
        if (++job.step >= job.req.decode_tokens)
          return finish_decode(id);
        if (job.sequence.size() % cfg.block_tokens == 0)
          st->checkpoint(id);
        self->delayed_send(self, std::chrono::microseconds(cfg.decode_step_us), step_atom::value, id);
      },
      [&stats = st->core->stats](stats_atom) { return stats; },
  };
}

} // namespace kvtier::node
