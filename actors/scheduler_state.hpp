#pragma once
// The scheduler's logic as a plain object: continuous batching with chunked
// prefill, admission by free blocks, preemption by swap or recompute, and
// immediate release of finished requests. The scheduler actor is a thin
// behavior over it; tests drive it directly.
//
// One iteration: build_plan() -> (block manager applies it) -> on_grant()
// gives the step to compute -> on_step_done() advances sequences. At most one
// plan or step is outstanding at a time.
// Invariants:
//  (1) A sequence is in exactly one of: waiting, loading, running, swapped,
//      and in the one container of its phase (waiting_, loading_, running_,
//      swapped_): the containers change where the phase does.
//  (2) Only running sequences whose blocks the block manager reported
//      resident enter a step.
//  (3) Every step's tokens <= max_batch_tokens and sequences <= max_running.
//  (4) A plan's work is proportional to what runs, loads, swaps in or is
//      admitted in it, never to the waiting queue: an overload (thousands
//      waiting) costs each plan no more than a light load. Admission scans
//      the queue from its head and stops at the first request refused.
//  (5) With model inputs, a step's work does not grow with the block tables
//      either: the grant carries what changed of each table, the scheduler
//      keeps each sequence's table whole (the grants' updates applied in
//      order), and a port that keeps tables receives only the entries it
//      lacks (step_sequence::table_from); a sequence that leaves the running
//      set (finished, preempted) is named in the next step's retired list and
//      carries its table whole when it steps again.

#include "actors/messages.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/metrics.hpp"

#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvtier {

enum class preemption_choice : uint8_t { automatic, swap, recompute };

struct scheduler_options {
  uint32_t max_running = 256;
  uint32_t max_batch_tokens = 8192;
  uint32_t prefill_chunk = 2048;
  preemption_choice preemption = preemption_choice::automatic;
  uint32_t block_tokens = 16;
  uint64_t hbm_blocks = 0;
  // Streaming (block_manager_state.hpp): a request larger than HBM is
  // admitted when its HBM working set (the recent window, a prefill chunk,
  // a partial tail and its copy) fits HBM and the whole fits HBM and DRAM.
  bool stream_from_dram = false;
  uint64_t dram_blocks = 0;
  uint32_t stream_recent_blocks = 0;
  bool record_steps = false;
  uint32_t compress_every_tokens = 0; // report decoding sequences to compression every N tokens
  bool compression = false;           // report sequences at prefill end
  // Queries of a prefill's last step whose attention mass a model sums per
  // block for compression (SnapKV's observation window; H2O's whole chunk).
  uint32_t attention_queries = 1;
  // The compute port runs a model: plans carry token ids, positions and
  // block tables, and each step's sampled tokens extend the sequences.
  bool model_inputs = false;
  uint32_t vocab_size = 0; // for token ids derived from trace block ids
  // The compute port keeps block tables between steps (compute_needs::
  // keeps_tables): a step carries only the entries it lacks.
  bool keeps_tables = false;
};

/// The options a config asks for. Without a DRAM tier, preemption recomputes.
scheduler_options scheduler_options_from(const config& cfg);

class scheduler_state {
public:
  scheduler_state(const scheduler_options& options, const cost_model& costs, scheduler_metrics* metrics,
                  std::vector<step_sample>* samples);

  /// A request arrives at `now` (seconds). Requests that can never fit in HBM
  /// (streaming: whose working set cannot, or that HBM and DRAM together
  /// cannot hold) are rejected, counted, and the first few say why.
  void on_arrival(request_spec spec, double now);

  /// The next plan for the block manager, or nullopt when a plan or step is
  /// outstanding or there is nothing to do.
  std::optional<step_ops> build_plan();

  /// Applies the block manager's answer; returns the step to compute (may be
  /// empty: then call build_plan() again if progress() says so).
  step_plan on_grant(const step_grant& grant, double now);

  /// The step finished at `now`. Returns sequences compression should look
  /// at: those that finished their prefill in it, and (every_tokens) those
  /// whose cache crossed another multiple of compress_every_tokens.
  /// With model inputs, `sampled` holds the token each sequence of the step
  /// sampled (its step_output); a recompute's prefill re-derives the token it
  /// already had, so it yields none.
  std::vector<prefill_stats> on_step_done(double now, double step_seconds,
                                          const std::vector<step_token>* sampled = nullptr);

  void on_ready(uint64_t seq, uint64_t tokens);
  /// Compression's answer for a reported sequence, through the block manager
  /// (possibly nothing removed): `dropped` positions of it are out of its
  /// table now. A reported sequence does not step until this arrives, so
  /// where a compaction lands never depends on message timing.
  void on_compacted(uint64_t seq, uint64_t dropped);

  /// True when the last plan changed something, so another plan may do more.
  bool progress() const { return progress_; }
  /// Records where unfinished requests stand (call when going idle).
  void note_idle();
  bool step_outstanding() const { return step_in_flight_; }
  /// Finished requests whose blocks the block manager has released.
  uint64_t released() const { return released_; }
  bool idle() const { return seqs_.empty(); }
  /// A request that produced its last token: its id, when its first token
  /// came, when it completed (the run's seconds).
  struct completion {
    uint64_t id;
    double first_token_s;
    double done_s;
  };
  /// The requests completed since the last call.
  std::vector<completion> take_completed() { return std::exchange(completed_, {}); }
  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }

private:
  enum class phase : uint8_t { waiting, loading, running, swapped };

  struct entry {
    request_spec spec;
    phase where = phase::waiting;
    uint64_t target = 0;  // tokens that must be cached before decoding
    uint64_t cached = 0;  // positions in the KV cache (compaction drops KV, never positions)
    uint64_t dropped = 0; // of which compaction removed from the block table
    uint32_t generated = 0;
    double arrival = 0, first_token = -1, last_token = 0, first_scheduled = -1;
    uint64_t admit_order = 0;
    bool preempting = false;
    bool compacting = false;       // reported to compression: no step until the block manager answers
    bool recomputing = false;      // preempted by recompute: its prefill re-derives a token it has
    std::vector<uint32_t> tokens;  // model inputs: prompt, then every sampled token
    std::vector<block_hash> chain; // computed once, handed to the block manager at admission
    std::vector<uint32_t> table;   // model inputs: the block table, as the grants' updates left it
    uint32_t port_has = 0;         // leading entries of `table` the compute port holds as they are
    // Its entry of scheduler_metrics::generated, found once: a lookup per
    // token in a map of every request of the run missed the cache each time.
    generated_text* generated_out = nullptr;
  };

  struct planned {
    uint64_t seq;
    sequence_op::kind what;
    uint32_t tokens;
  };

  struct stepping {
    uint64_t seq;
    uint32_t new_tokens;
    bool grows;
    size_t result;               // index of its op in the grant
    uint64_t dropped = 0;        // the table's dropped positions, as the grant said
    uint32_t mass_queries = 0;   // > 0: the model reports attention mass for compression
    std::vector<uint32_t> table; // ... over this table (model inputs)
  };

  /// Why a request of `total` tokens can never run, or "" when it can.
  std::string refusal(const request_spec& spec, uint64_t total) const;
  step_sequence model_step(const stepping& s, entry& e) const;
  /// A ready grow's or admission's table update (model inputs).
  void take_table(entry& e, const op_result& r) const;
  /// The sequence leaves the running set: the port may drop its table.
  void retire(uint64_t seq);
  /// Queries whose attention mass compression wants from this step (0: none).
  uint32_t stats_queries(const stepping& s, const entry& e) const;

  preempt_mode choose_mode(const entry& e) const;
  void remove_running(uint64_t seq);
  void remove_loading(uint64_t seq);
  /// Enters `seq` loading: its blocks are on their way up.
  void start_loading(uint64_t seq, entry& e);
  void pick_victim();
  /// Of `grown` tokens appended to a prefilling sequence, how many its
  /// supplied KV covers: those are cached at once; the rest are computed.
  uint32_t take_supplied(entry& e, uint32_t grown);

  scheduler_options options_;
  const cost_model& costs_;
  scheduler_metrics* metrics_;
  std::vector<step_sample>* samples_;
  std::unordered_map<uint64_t, entry> seqs_;
  std::deque<uint64_t> waiting_;
  std::vector<uint64_t> running_; // admission order: the youngest is preempted first
  std::vector<uint64_t> loading_; // no order: plans only count and sum over it
  std::deque<uint64_t> swapped_;
  std::vector<uint64_t> to_release_;
  std::vector<uint64_t> to_preempt_;
  std::vector<uint64_t> retired_; // for the next step's plan (step_plan::retired)
  std::vector<planned> plan_;
  std::vector<stepping> step_;
  bool plan_in_flight_ = false;
  bool step_in_flight_ = false;
  bool pressure_ = false; // a grow failed: admit nothing new until a clean step
  bool progress_ = false;
  uint64_t next_step_ = 1;
  uint64_t next_admit_ = 1;
  // An admission found no room when HBM had `admission_floor_` free blocks:
  // retrying before more are free would repeat the same prefix lookups.
  uint32_t admission_floor_ = 0;
  bool admission_blocked_ = false;
  uint32_t last_hbm_free_ = 0;
  bool plan_seen_ = false; // last_hbm_free_ is known
  uint64_t released_ = 0;
  std::vector<completion> completed_;
};

} // namespace kvtier
