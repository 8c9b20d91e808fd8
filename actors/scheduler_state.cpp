#include "actors/scheduler_state.hpp"

#include "compression/block_selection.hpp"
#include "runtime/check.hpp"
#include "runtime/prefix_chain.hpp"
#include "runtime/prompt_tokens.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace kvtier {
namespace {

// Rejections whose reason the metrics keep: a trace of many oversized
// requests says the same thing each time.
constexpr size_t max_rejections_told = 8;

} // namespace

scheduler_options scheduler_options_from(const config& cfg) {
  scheduler_options o;
  o.max_running = cfg.scheduler.max_running;
  o.max_batch_tokens = cfg.scheduler.max_batch_tokens;
  o.prefill_chunk = cfg.scheduler.prefill_chunk;
  o.block_tokens = cfg.cache.block_tokens;
  o.hbm_blocks = cfg.hbm_blocks();
  o.stream_from_dram = cfg.streams_from_dram();
  o.dram_blocks = cfg.dram_blocks();
  o.stream_recent_blocks = cfg.stream_recent_blocks();
  o.compression = cfg.compression.policy != compression_policy::none;
  o.compress_every_tokens = o.compression ? cfg.compression.every_tokens : 0;
  switch (cfg.compression.policy) {
    case compression_policy::h2o:
    case compression_policy::h2o_window:
    case compression_policy::h2o_raw:
      o.attention_queries = cfg.scheduler.prefill_chunk; // every query of the last chunk
      break;
    case compression_policy::snapkv:
      o.attention_queries = compression::observation_window;
      break;
    default:
      o.attention_queries = 1; // measured, not used to choose
  }
  using p = preemption_choice;
  o.preemption = cfg.scheduler.preemption == preemption_mode::swap ? p::swap
      : cfg.scheduler.preemption == preemption_mode::recompute     ? p::recompute
                                                                   : p::automatic;
  if (cfg.tiers.dram.capacity_bytes == 0 || !cfg.tiers.dram.enabled)
    o.preemption = p::recompute;
  return o;
}

scheduler_state::scheduler_state(const scheduler_options& options, const cost_model& costs, scheduler_metrics* metrics,
                                 std::vector<step_sample>* samples)
    : options_(options), costs_(costs), metrics_(metrics), samples_(samples) {
  KVTIER_CHECK(metrics_ != nullptr, "scheduler_state: metrics sink required");
}

void scheduler_state::on_arrival(request_spec spec, double now) {
  ++metrics_->requests_arrived;
  if (!spec.prompt.empty())
    spec.prompt_tokens = spec.prompt.size();
  uint64_t total = spec.prompt_tokens + spec.output_tokens;
  if (auto why = refusal(spec, total); !why.empty() || spec.prompt_tokens == 0) {
    ++metrics_->requests_rejected;
    if (!why.empty() && metrics_->rejections.size() < max_rejections_told)
      metrics_->rejections.push_back(std::move(why));
    return;
  }
  auto id = spec.id;
  entry e;
  e.target = spec.prompt_tokens;
  e.arrival = now;
  if (options_.model_inputs) {
    if (!spec.prompt.empty())
      e.tokens = std::move(spec.prompt);
    else if (!spec.external_ids.empty())
      e.tokens =
          tokens_from_external(spec.external_ids, spec.external_block_tokens, spec.prompt_tokens, options_.vocab_size);
    else
      e.tokens = tokens_from_request_id(spec.id, spec.prompt_tokens, options_.vocab_size);
  }
  spec.prompt.clear();
  e.spec = std::move(spec);
  auto [it, inserted] = seqs_.emplace(id, std::move(e));
  KVTIER_CHECK(inserted, "scheduler_state::on_arrival: duplicate request id");
  waiting_.push_back(id);
}

std::string scheduler_state::refusal(const request_spec& spec, uint64_t total) const {
  const uint64_t B = options_.block_tokens;
  uint64_t blocks = (total + B - 1) / B;
  if (blocks <= options_.hbm_blocks)
    return {};
  auto head = fmt::format("request {}: {} tokens (prompt {} + output {}) need {} blocks of {} tokens", spec.id, total,
                          spec.prompt_tokens, spec.output_tokens, blocks, B);
  if (!options_.stream_from_dram)
    return fmt::format("{}; HBM holds {} ([tiers.hbm] capacity) and [cache] stream_from_dram is off (or there is no "
                       "DRAM tier to stream from)",
                       head, options_.hbm_blocks);
  // Streaming keeps in HBM the recent window, a prefill chunk's blocks, and
  // a partial tail with its copy-on-write copy.
  uint64_t chunk = std::min(options_.prefill_chunk, options_.max_batch_tokens);
  uint64_t working = options_.stream_recent_blocks + (chunk + B - 1) / B + 2;
  if (working > options_.hbm_blocks)
    return fmt::format("{}; streaming keeps {} of them in HBM (the recent window, [cache] stream_recent_tokens = {}; "
                       "a chunk, [scheduler] prefill_chunk = {}; a partial tail and its copy), but HBM holds {} "
                       "([tiers.hbm] capacity)",
                       head, working, uint64_t{options_.stream_recent_blocks} * B, chunk, options_.hbm_blocks);
  if (blocks > options_.hbm_blocks + options_.dram_blocks)
    return fmt::format("{}; HBM ({}) and DRAM ({}) hold {} together ([tiers.hbm] and [tiers.dram] capacity)", head,
                       options_.hbm_blocks, options_.dram_blocks, options_.hbm_blocks + options_.dram_blocks);
  return {};
}

preempt_mode scheduler_state::choose_mode(const entry& e) const {
  using p = preemption_choice;
  if (options_.preemption == p::swap)
    return preempt_mode::swap;
  if (options_.preemption == p::recompute)
    return preempt_mode::recompute;
  // Swap costs the bytes both ways over PCIe; recompute costs a prefill.
  uint64_t blocks = (e.cached - e.dropped + options_.block_tokens - 1) / options_.block_tokens;
  uint64_t bytes = blocks * costs_.bytes_per_block();
  const auto& pcie = costs_.hardware().pcie;
  double swap = cost_model::link_seconds(pcie.d2h, bytes, blocks) + cost_model::link_seconds(pcie.h2d, bytes, blocks);
  double recompute = costs_.prefill_seconds(e.cached, 0, options_.prefill_chunk);
  return swap < recompute ? preempt_mode::swap : preempt_mode::recompute;
}

std::optional<step_ops> scheduler_state::build_plan() {
  progress_ = false;
  if (plan_in_flight_ || step_in_flight_)
    return std::nullopt;
  step_ops out;
  out.step = next_step_;
  plan_.clear();
  auto add = [&](sequence_op op) {
    plan_.push_back({op.seq, op.what, op.tokens});
    out.ops.push_back(std::move(op));
  };
  for (auto seq : to_release_) {
    add({sequence_op::kind::release, seq});
    retire(seq);
  }
  to_release_.clear();
  for (auto seq : to_preempt_) {
    sequence_op op{sequence_op::kind::preempt, seq};
    op.mode = choose_mode(seqs_.at(seq));
    add(std::move(op));
    retire(seq);
  }
  to_preempt_.clear();

  // A sequence larger than HBM holds all of HBM it can and streams the
  // rest: whatever joined it would only be preempted again (and again), so
  // nothing is admitted or swapped in beside it.
  // Headroom: what the running and loading sequences still need — the rest
  // of their prompt while prefilling, one block each while decoding (a
  // loading one grows as soon as its blocks land). Swapping in or admitting
  // into less only buys a preemption later.
  const uint64_t B = options_.block_tokens;
  bool beside_streaming = false;
  uint64_t headroom = 1;
  auto count_active = [&](const entry& e) {
    beside_streaming |= (e.target + e.spec.output_tokens + B - 1) / B > options_.hbm_blocks;
    headroom += e.cached < e.target ? (e.target - e.cached + B - 1) / B : 1;
  };
  for (auto seq : loading_)
    count_active(seqs_.at(seq));
  const bool loading = !loading_.empty();

  uint32_t budget = options_.max_batch_tokens;
  uint32_t batch = 0;
  for (auto seq : running_) {
    auto& e = seqs_.at(seq);
    count_active(e);
    if (e.preempting || e.compacting || budget == 0 || batch >= options_.max_running)
      continue;
    uint32_t tokens = 0;
    if (e.cached < e.target)
      tokens = static_cast<uint32_t>(std::min<uint64_t>({e.target - e.cached, options_.prefill_chunk, budget}));
    else if (!(options_.model_inputs && e.tokens.size() <= e.cached))
      tokens = 1;
    // else: a prompt loaded whole from a lower tier has no token to feed yet.
    // Like one found whole in HBM at admission, it recomputes its last
    // position for its first token: a grow of nothing, stepped on_grant.
    add({sequence_op::kind::grow, seq, tokens});
    budget -= tokens;
    ++batch;
  }
  size_t active = running_.size() + loading_.size();
  if (!pressure_ && !beside_streaming && !swapped_.empty() && active < options_.max_running) {
    const auto& e = seqs_.at(swapped_.front());
    // Its blocks and its next step's: swapped in without room to grow, it
    // would fail its first grow and be preempted again.
    uint64_t next = e.cached < e.target ? std::min<uint64_t>(e.target - e.cached, options_.prefill_chunk) : 1;
    uint64_t blocks = (e.cached - e.dropped + next + B - 1) / B;
    // With nothing running or loading no plan refreshes last_hbm_free_: just
    // try. While a sequence loads, its ready notice plans again; trying now
    // could take the room its blocks land in, fail to grow, be preempted and
    // swap in again within the same instant, for ever.
    if ((running_.empty() && !loading) || !plan_seen_ || last_hbm_free_ >= blocks + headroom) {
      add({sequence_op::kind::swap_in, swapped_.front()});
      ++active;
    }
  }
  bool room_changed = !admission_blocked_ || last_hbm_free_ > admission_floor_;
  if (!pressure_ && !beside_streaming && swapped_.empty() && room_changed) {
    for (size_t i = 0; i < waiting_.size() && budget > 0 && active < options_.max_running; ++i) {
      auto seq = waiting_[i];
      auto& e = seqs_.at(seq);
      // Room for the whole prompt (its cached prefix is not known yet: count
      // it all) beside what is running; with nothing running, just try.
      uint64_t prompt_blocks = (e.target + B - 1) / B;
      if (!(running_.empty() && i == 0) && plan_seen_ && last_hbm_free_ < headroom + prompt_blocks)
        break;
      // One larger than HBM (streaming) starts alone, and runs alone.
      bool larger_than_hbm = (e.target + e.spec.output_tokens + B - 1) / B > options_.hbm_blocks;
      if (larger_than_hbm && (i > 0 || !running_.empty()))
        break;
      headroom += prompt_blocks;
      // A model's cached prefix must hold the very tokens: hash them (full
      // blocks only, so no partial block is ever shared).
      if (e.chain.empty() && options_.model_inputs)
        e.chain = chain_from_tokens(std::span(e.tokens).first(e.spec.prompt_tokens), options_.block_tokens,
                                    tenant_salt{e.spec.tenant});
      else if (e.chain.empty() && !e.spec.external_ids.empty())
        e.chain = chain_from_external(e.spec.external_ids, e.spec.external_block_tokens, e.spec.prompt_tokens,
                                      options_.block_tokens, tenant_salt{e.spec.tenant});
      sequence_op op{sequence_op::kind::admit, seq};
      op.tokens = static_cast<uint32_t>(std::min<uint64_t>({e.target, options_.prefill_chunk, budget}));
      op.prompt_tokens = e.spec.prompt_tokens;
      op.target_tokens = e.target;
      op.chain = e.chain; // kept for a retry after no_room
      budget -= op.tokens;
      ++active;
      add(std::move(op));
      if (larger_than_hbm)
        break;
    }
  }
  if (out.ops.empty())
    return std::nullopt;
  plan_in_flight_ = true;
  return out;
}

void scheduler_state::retire(uint64_t seq) {
  if (!options_.model_inputs)
    return;
  retired_.push_back(seq);
  if (auto it = seqs_.find(seq); it != seqs_.end())
    it->second.port_has = 0;
}

void scheduler_state::take_table(entry& e, const op_result& r) const {
  if (!options_.model_inputs || r.status != admit_status::ready)
    return;
  KVTIER_CHECK(r.table_from <= e.table.size(), "scheduler_state: a table update past the table's end");
  e.table.resize(r.table_from);
  e.table.insert(e.table.end(), r.table.begin(), r.table.end());
  e.port_has = std::min(e.port_has, r.table_from);
}

void scheduler_state::remove_running(uint64_t seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end())
    running_.erase(it);
}

void scheduler_state::remove_loading(uint64_t seq) {
  auto it = std::find(loading_.begin(), loading_.end(), seq);
  if (it != loading_.end())
    loading_.erase(it);
}

void scheduler_state::start_loading(uint64_t seq, entry& e) {
  e.where = phase::loading;
  loading_.push_back(seq);
}

void scheduler_state::pick_victim() {
  // The youngest running sequence makes room (vLLM's order); it may be the failing one.
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    auto& v = seqs_.at(*it);
    if (v.preempting)
      continue;
    v.preempting = true;
    to_preempt_.push_back(*it);
    progress_ = true; // the next plan carries the preemption
    return;
  }
}

step_plan scheduler_state::on_grant(const step_grant& grant, double now) {
  KVTIER_CHECK(plan_in_flight_, "scheduler_state::on_grant: no plan outstanding");
  KVTIER_CHECK(grant.results.size() == plan_.size(), "scheduler_state::on_grant: result count mismatch");
  plan_in_flight_ = false;
  ++next_step_;
  step_plan plan;
  plan.step_id = grant.step;
  step_.clear();
  bool failed_grow = false;
  bool admit_no_room = false;
  std::vector<uint64_t> admitted;
  // The plan's admissions were the head of the waiting queue; recomputed
  // sequences go in front of them. Only that much of it is searched.
  size_t waiting_head = 0;
  for (size_t i = 0; i < plan_.size(); ++i) {
    const auto& p = plan_[i];
    const auto& r = grant.results[i];
    switch (p.what) {
      case sequence_op::kind::release:
        progress_ = true;
        ++released_;
        break;
      case sequence_op::kind::preempt: {
        auto& e = seqs_.at(p.seq);
        KVTIER_CHECK(e.where == phase::running, "scheduler_state: preempted a sequence that was not running");
        e.preempting = false;
        remove_running(p.seq);
        progress_ = true;
        if (r.mode == preempt_mode::swap) {
          ++metrics_->preemptions_swap;
          e.where = phase::swapped;
          swapped_.push_back(p.seq);
        } else {
          ++metrics_->preemptions_recompute;
          metrics_->recomputed_tokens += e.cached;
          e.spec.supplied_tokens = 0; // what came with the request is gone with its blocks
          // Recompute what it had, then go on: the rest of its prompt, or decoding.
          e.target = std::max(e.target, e.cached);
          e.recomputing = e.generated > 0;
          e.cached = 0;
          e.dropped = 0; // recomputed whole
          e.where = phase::waiting;
          waiting_.push_front(p.seq);
          ++waiting_head;
        }
        break;
      }
      case sequence_op::kind::grow:
        take_table(seqs_.at(p.seq), r);
        if (r.status == admit_status::ready && p.tokens == 0) {
          step_.push_back({p.seq, 1, false, i}); // the last prompt position again (build_plan says why)
        } else if (r.status == admit_status::ready) {
          if (auto computed = p.tokens - take_supplied(seqs_.at(p.seq), p.tokens); computed > 0)
            step_.push_back({p.seq, computed, true, i});
        } else if (r.status == admit_status::loading) {
          // Its cold blocks are on their way to DRAM (streaming): it sits out
          // until they land, then grows into the room they leave.
          auto& e = seqs_.at(p.seq);
          remove_running(p.seq);
          start_loading(p.seq, e);
          // A grow that failed earlier in this grant may have picked it to
          // make room: it cannot be preempted mid-copy, and is making room.
          e.preempting = false;
          std::erase(to_preempt_, p.seq);
          progress_ = true;
        } else {
          failed_grow = true;
          pick_victim();
        }
        break;
      case sequence_op::kind::swap_in: {
        auto& e = seqs_.at(p.seq);
        if (r.status == admit_status::no_room)
          break;
        swapped_.pop_front();
        progress_ = true;
        e.cached = r.tokens;
        e.admit_order = next_admit_++;
        if (r.status == admit_status::ready) {
          e.where = phase::running;
          running_.push_back(p.seq);
        } else {
          start_loading(p.seq, e);
        }
        break;
      }
      case sequence_op::kind::admit: {
        auto& e = seqs_.at(p.seq);
        ++waiting_head;
        if (r.status == admit_status::no_room) {
          admit_no_room = true;
          break;
        }
        admitted.push_back(p.seq);
        progress_ = true;
        e.admit_order = next_admit_++;
        e.chain.clear();
        e.chain.shrink_to_fit();
        if (e.first_scheduled < 0) {
          e.first_scheduled = now;
          metrics_->queue_s.push_back(now - e.arrival);
        }
        if (r.status == admit_status::loading) {
          start_loading(p.seq, e);
          break;
        }
        e.where = phase::running;
        running_.push_back(p.seq);
        e.cached = r.tokens;
        take_table(e, r);
        uint64_t left = e.target - std::min(e.target, e.cached);
        if (left == 0) { // the whole prompt was cached: recompute the last position only
          step_.push_back({p.seq, 1, false, i});
          break;
        }
        auto grown = static_cast<uint32_t>(std::min<uint64_t>(p.tokens, left));
        if (auto computed = grown - take_supplied(e, grown); computed > 0)
          step_.push_back({p.seq, computed, true, i});
        break;
      }
    }
  }
  if (!admitted.empty()) {
    auto head_end = waiting_.begin() + static_cast<std::ptrdiff_t>(waiting_head);
    auto kept = std::remove_if(waiting_.begin(), head_end, [&](uint64_t s) {
      return std::find(admitted.begin(), admitted.end(), s) != admitted.end();
    });
    waiting_.erase(kept, head_end);
  }
  pressure_ = failed_grow;
  last_hbm_free_ = grant.hbm_free;
  plan_seen_ = true;
  if (admit_no_room) {
    admission_blocked_ = true;
    admission_floor_ = grant.hbm_free;
  } else if (!admitted.empty()) {
    admission_blocked_ = false;
  }
  if (step_.empty())
    return plan;
  step_in_flight_ = true;
  uint32_t prefill = 0, decode = 0;
  uint64_t streamed = 0;
  plan.sequences.reserve(step_.size());
  for (auto& s : step_) {
    auto& e = seqs_.at(s.seq);
    const auto& r = grant.results[s.result];
    bool decoding = e.cached >= e.target;
    (decoding ? decode : prefill) += s.new_tokens;
    s.dropped = r.dropped_tokens;
    s.mass_queries = std::min(stats_queries(s, e), s.new_tokens); // the queries the step has
    if (options_.model_inputs) {
      plan.sequences.push_back(model_step(s, e));
      if (s.mass_queries > 0)
        s.table = e.table;
    } else {
      plan.sequences.push_back({s.seq, s.new_tokens, e.cached});
      plan.sequences.back().dropped_tokens = s.dropped;
    }
    plan.sequences.back().streamed_blocks = r.streamed_blocks;
    streamed += r.streamed_blocks;
  }
  metrics_->streamed_blocks += streamed;
  metrics_->streamed_steps += streamed > 0 ? 1 : 0;
  if (options_.model_inputs) {
    for (const auto& r : grant.results)
      plan.copies.insert(plan.copies.end(), r.copies.begin(), r.copies.end());
    plan.retired = std::exchange(retired_, {});
  }
  ++metrics_->steps;
  metrics_->prefill_tokens += prefill;
  metrics_->decode_tokens += decode;
  metrics_->batch_size_sum += step_.size();
  metrics_->max_batch_size = std::max<uint32_t>(metrics_->max_batch_size, static_cast<uint32_t>(step_.size()));
  if (options_.record_steps && samples_)
    samples_->push_back({now, static_cast<uint32_t>(step_.size()), prefill, decode,
                         static_cast<uint32_t>(waiting_.size()), grant.hbm_used, grant.dram_used, 0});
  return plan;
}

step_sequence scheduler_state::model_step(const stepping& s, entry& e) const {
  step_sequence out{s.seq, s.new_tokens, e.cached};
  // A grow appends after the cache; a prompt cached whole recomputes its last position.
  out.first_position = s.grows ? e.cached : e.cached - 1;
  KVTIER_CHECK(out.first_position + s.new_tokens <= e.tokens.size(), "scheduler_state: a step past the known tokens");
  auto first = e.tokens.begin() + static_cast<std::ptrdiff_t>(out.first_position);
  out.tokens.assign(first, first + s.new_tokens);
  KVTIER_CHECK(uint64_t{e.table.size()} * options_.block_tokens >= out.first_position + s.new_tokens - s.dropped,
               "scheduler_state: a block table shorter than the step");
  // A port that keeps tables gets the entries it lacks; any other, the table.
  out.table_from = options_.keeps_tables ? e.port_has : 0;
  out.block_table.assign(e.table.begin() + out.table_from, e.table.end());
  e.port_has = static_cast<uint32_t>(e.table.size());
  out.dropped_tokens = s.dropped;
  out.want_attention_stats = s.mass_queries > 0;
  out.attention_queries = std::max(s.mass_queries, 1u);
  return out;
}

uint32_t scheduler_state::stats_queries(const stepping& s, const entry& e) const {
  if (!options_.compression)
    return 0;
  // The step that ends a prefill (or recomputes a cached prompt's last position).
  if (!s.grows || (e.cached < e.target && e.cached + s.new_tokens >= e.target))
    return std::max(options_.attention_queries, 1u);
  const uint64_t every = options_.compress_every_tokens;
  if (every > 0 && e.cached >= e.target && e.cached / every != (e.cached + s.new_tokens) / every)
    return 1;
  return 0;
}

std::vector<prefill_stats> scheduler_state::on_step_done(double now, double step_seconds,
                                                         const std::vector<step_token>* sampled) {
  KVTIER_CHECK(step_in_flight_, "scheduler_state::on_step_done: no step outstanding");
  step_in_flight_ = false;
  metrics_->busy_seconds += step_seconds;
  if (options_.record_steps && samples_ && !samples_->empty())
    samples_->back().step_s = step_seconds;
  std::vector<prefill_stats> prefilled;
  for (auto& s : step_) {
    auto& e = seqs_.at(s.seq);
    const step_token* t = nullptr;
    if (sampled) {
      // A port answers in the plan's order: the step's i-th sequence is the
      // i-th token, and the search is only for a port that does not.
      const size_t i = static_cast<size_t>(&s - step_.data());
      if (i < sampled->size() && (*sampled)[i].sequence_id == s.seq) {
        t = &(*sampled)[i];
      } else {
        auto it =
            std::find_if(sampled->begin(), sampled->end(), [&](const step_token& x) { return x.sequence_id == s.seq; });
        t = it == sampled->end() ? nullptr : &*it;
      }
    }
    auto report = [&] {
      prefill_stats p{s.seq, e.cached, s.dropped};
      if (t) {
        p.block_mass = t->block_attention;
        p.last_block_mass = t->last_query_attention;
        p.mass_queries = s.mass_queries;
        p.slots = std::move(s.table);
      }
      prefilled.push_back(std::move(p));
      e.compacting = true;
    };
    bool was_prefill = e.cached < e.target || !s.grows;
    if (s.grows)
      e.cached += s.new_tokens;
    if (was_prefill) {
      if (e.cached < e.target)
        continue; // more chunks to go
      if (options_.compression)
        report();
    } else if (options_.compress_every_tokens > 0 && s.grows &&
               (e.cached - s.new_tokens) / options_.compress_every_tokens !=
                   e.cached / options_.compress_every_tokens) {
      report();
    }
    if (was_prefill && e.recomputing) {
      e.recomputing = false; // its sampled token is the one it had before
      continue;
    }
    // A finished prefill or a decode yields one token.
    ++e.generated;
    if (options_.model_inputs) {
      KVTIER_CHECK(sampled != nullptr, "scheduler_state: a model step completed without its tokens");
      KVTIER_CHECK(t != nullptr, "scheduler_state: a stepped sequence sampled no token");
      e.tokens.push_back(t->token);
      if (!e.generated_out)
        e.generated_out = &metrics_->generated[s.seq]; // a map's entries stay where they are
      e.generated_out->tokens.push_back(t->token);
      e.generated_out->logits.push_back(t->logit);
    }
    if (e.first_token < 0) {
      e.first_token = now;
      metrics_->ttft_s.push_back(now - e.arrival);
    }
    e.last_token = now;
    if (e.generated >= e.spec.output_tokens) {
      ++metrics_->requests_completed;
      metrics_->e2e_s.push_back(now - e.arrival);
      if (e.generated > 1)
        metrics_->tpot_s.push_back((e.last_token - e.first_token) / (e.generated - 1));
      completed_.push_back({s.seq, e.first_token, now});
      remove_running(s.seq);
      std::erase(to_preempt_, s.seq); // finishing makes the room preempting it would have
      to_release_.push_back(s.seq);
      seqs_.erase(s.seq);
    }
  }
  return prefilled;
}

uint32_t scheduler_state::take_supplied(entry& e, uint32_t grown) {
  uint64_t supplied = std::min(e.spec.supplied_tokens, e.target);
  if (e.cached >= supplied)
    return 0;
  auto covered = static_cast<uint32_t>(std::min<uint64_t>(grown, supplied - e.cached));
  const uint64_t B = options_.block_tokens;
  metrics_->supplied_tokens += covered;
  metrics_->supplied_blocks += (e.cached + covered + B - 1) / B - (e.cached + B - 1) / B;
  e.cached += covered;
  progress_ = true; // cached without a step: the next plan goes on from there
  return covered;
}

void scheduler_state::note_idle() {
  KVTIER_CHECK(waiting_.size() + loading_.size() + running_.size() + swapped_.size() == seqs_.size(),
               "scheduler_state: a sequence outside its phase's container");
  metrics_->idle_waiting = static_cast<uint32_t>(waiting_.size());
  metrics_->idle_loading = static_cast<uint32_t>(loading_.size());
  metrics_->idle_running = static_cast<uint32_t>(running_.size());
  metrics_->idle_swapped = static_cast<uint32_t>(swapped_.size());
}

void scheduler_state::on_ready(uint64_t seq, uint64_t tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.where != phase::loading)
    return;
  it->second.where = phase::running;
  it->second.cached = tokens;
  remove_loading(seq);
  running_.push_back(seq);
}

void scheduler_state::on_compacted(uint64_t seq, uint64_t dropped) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    return;
  // Positions stay: new tokens keep theirs (RoPE); only the KV held shrinks.
  it->second.dropped = dropped;
  it->second.compacting = false;
  progress_ = true;
}

} // namespace kvtier
