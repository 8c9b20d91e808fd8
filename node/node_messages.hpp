#pragma once
// What cluster nodes, the router and its clients say to each other across
// processes (CAF's middleman, BASP over loopback TCP). Every type here is
// registered for serialization by add_node_message_types; a process that
// talks to a node calls it on its actor_system_config before starting.
//
// The conversation:
//   client -> router   (submit_atom, request)            -> request_result | error
//   router -> prefill  (prefill_atom, request)           -> prefill_result | error
//   router -> decode   (decode_atom, request)            -> decode_result | error
//   decode -> router   (decode_started_atom, id, node)      one-way, as decoding begins
//   decode -> router   (decode_progress_atom, id, tokens)    one-way: the tokens decoded so far,
//                                                           whose blocks the store now holds
//   anyone -> node     (stats_atom)                      -> node_stats
//   client -> router   (where_atom, id)                  -> std::string: the request's phase and node
//   client -> router   (live_atom)                       -> std::vector<std::string>: the live members
//   client -> router   (members_atom)                    -> std::vector<std::string>: every member
// Times are steady_clock nanoseconds: one clock for every process of a machine.

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::node {

using submit_atom = caf::atom_constant<caf::atom("submit")>;
using prefill_atom = caf::atom_constant<caf::atom("prefill")>;
using decode_atom = caf::atom_constant<caf::atom("decode")>;
using decode_started_atom = caf::atom_constant<caf::atom("dstarted")>;
using decode_progress_atom = caf::atom_constant<caf::atom("dprogress")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using where_atom = caf::atom_constant<caf::atom("where")>;
using live_atom = caf::atom_constant<caf::atom("live")>;
using members_atom = caf::atom_constant<caf::atom("members")>;

/// One inference request: a tenant's prompt and how many tokens to decode.
/// `decoded` is empty from a client; the router fills it when a decode moves
/// to another node mid-request: the tokens decoded before, whose KV blocks
/// the store holds (prompt and decoded end on a block boundary of the node
/// that wrote them; a node of another block size resumes after fewer).
struct request {
  uint64_t id = 0;
  uint64_t salt = 0; // the tenant's salt: blocks of different salts never meet
  std::vector<uint32_t> prompt;
  uint32_t decode_tokens = 0; // in all, `decoded` included
  std::vector<uint32_t> decoded;
};

/// A prefill node's answer: every block of the prompt is in the remote store.
struct prefill_result {
  uint64_t id = 0;
  std::string node;
  uint32_t blocks = 0;          // the prompt's blocks (the tail may be partial)
  uint64_t tokens_computed = 0; // prefill tokens this node computed for the request
  uint64_t kv_checksum = 0;     // XXH3-64 over the blocks' bytes, in chain order
  uint64_t bytes_written = 0;   // to the remote store
  int64_t start_ns = 0;
  int64_t end_ns = 0; // the last block's write acknowledged
};

/// A decode node's answer.
struct decode_result {
  uint64_t id = 0;
  std::string node;
  uint32_t blocks_local = 0;        // found in the node's own tier
  uint32_t blocks_pulled = 0;       // read from the remote store
  uint64_t tokens_recomputed = 0;   // tokens of blocks neither tier held (the prompt's or checkpointed ones)
  uint32_t tokens_resumed = 0;      // decoded on another node before; not decoded again
  uint32_t blocks_checkpointed = 0; // of decoded tokens, written to the store as they filled
  uint64_t kv_checksum = 0;         // over the blocks it started from: prefill_result's, unless resumed
  uint64_t output_checksum = 0;     // of the decoded tokens
  uint64_t bytes_pulled = 0;
  int64_t pull_start_ns = 0;
  int64_t decode_start_ns = 0; // every block in place
  int64_t end_ns = 0;
};

/// The router's answer to its client: both halves and how many decode nodes were tried.
struct request_result {
  prefill_result prefill;
  decode_result decode;
  uint32_t decode_attempts = 0;
};

/// A node's counters since start.
struct node_stats {
  std::string node;
  std::string role;
  uint64_t prefill_tokens_computed = 0; // by prefills
  uint64_t tokens_recomputed = 0;       // by decodes, for blocks no tier held
  uint64_t blocks_written = 0;          // to the remote store
  uint64_t blocks_pulled = 0;           // from the remote store
  uint64_t blocks_local = 0;            // decodes' hits in the node's own tier
  uint64_t remote_misses = 0;           // remote reads that failed (missing, corrupted, lost)
  uint64_t decode_tokens = 0;           // decoded here (resumed ones not counted again)
  uint64_t tokens_resumed = 0;          // decoded elsewhere before a request moved here
  uint64_t requests = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request& x) {
  return f(caf::meta::type_name("kvtier_request"), x.id, x.salt, x.prompt, x.decode_tokens, x.decoded);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_result& x) {
  return f(caf::meta::type_name("kvtier_prefill_result"), x.id, x.node, x.blocks, x.tokens_computed, x.kv_checksum,
           x.bytes_written, x.start_ns, x.end_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, decode_result& x) {
  return f(caf::meta::type_name("kvtier_decode_result"), x.id, x.node, x.blocks_local, x.blocks_pulled,
           x.tokens_recomputed, x.tokens_resumed, x.blocks_checkpointed, x.kv_checksum, x.output_checksum,
           x.bytes_pulled, x.pull_start_ns, x.decode_start_ns, x.end_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_result& x) {
  return f(caf::meta::type_name("kvtier_request_result"), x.prefill, x.decode, x.decode_attempts);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_stats& x) {
  return f(caf::meta::type_name("kvtier_node_stats"), x.node, x.role, x.prefill_tokens_computed, x.tokens_recomputed,
           x.blocks_written, x.blocks_pulled, x.blocks_local, x.remote_misses, x.decode_tokens, x.tokens_resumed,
           x.requests);
}

/// Registers the types above on `cfg` (inline: a file of its own would cost a
/// compile of CAF's config headers for four lines).
inline void add_node_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<request>("kvtier_request");
  cfg.add_message_type<prefill_result>("kvtier_prefill_result");
  cfg.add_message_type<decode_result>("kvtier_decode_result");
  cfg.add_message_type<request_result>("kvtier_request_result");
  cfg.add_message_type<node_stats>("kvtier_node_stats");
  cfg.add_message_type<std::vector<uint32_t>>("kvtier_tokens");
}

} // namespace kvtier::node
