#include "compression/model_quality.hpp"

#include "compression/block_selection.hpp"
#include "kernels/model/forward_cpu.hpp"
#include "kernels/model/host_kv_pool.hpp"
#include "kernels/quant/quant_cpu.hpp"
#include "runtime/error.hpp"
#include "runtime/splitmix.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

namespace kvtier::compression {
namespace {

using model::paged_kv_pool;

bool is_block_policy(std::string_view p) {
  return p == "random" || p == "streaming_llm" || p == "sliding_window" || p == "h2o" || p == "h2o_raw" ||
      p == "h2o_window" || p == "snapkv" || p == "oracle";
}

// One variant's outcome on one prompt: summed loss, digits right, blocks kept.
struct outcome {
  double nats = 0;
  uint32_t correct = 0; // targets whose most likely byte was the target
  double mass_kept = 1;
  uint64_t kept_blocks = 0;
};

// A prompt: context_tokens bytes of context, then the continuation fed one
// byte at a time; targets are the continuation's next bytes.
struct prompt {
  std::vector<uint32_t> tokens; // context + continuation + 1
  bool passkey = false;
};

// -log softmax(logits)[target]; `argmax_right` says whether the target was
// the most likely byte (the first of equal maxima).
double nll(const std::vector<float>& logits, uint32_t target, bool& argmax_right) {
  const auto best = std::max_element(logits.begin(), logits.end());
  const float top = *best;
  double sum = 0;
  for (float l : logits)
    sum += std::exp(static_cast<double>(l) - top);
  argmax_right = static_cast<size_t>(best - logits.begin()) == target;
  return std::log(sum) - (static_cast<double>(logits[target]) - top);
}

// Measures every variant on one prompt with one worker's pools.
class prompt_runner {
public:
  prompt_runner(const model::llama_weights& w, const quality_options& o, uint32_t continuation)
      : w_(w),
        o_(o),
        ctx_blocks_(o.context_tokens / o.block_tokens),
        cont_blocks_((continuation + o.block_tokens - 1) / o.block_tokens),
        ctx_table_(ctx_blocks_),
        bf16_(w.config, ctx_blocks_ + cont_blocks_, o.block_tokens, false),
        forward_(w, bf16_.view) {
    std::iota(ctx_table_.begin(), ctx_table_.end(), 0u); // the context's blocks in slots 0..ctx_blocks_-1
  }

  // Rows in report order after "full": policies x budgets, then quantizers.
  std::vector<outcome> run(const prompt& p, uint64_t index, uint64_t& fed) {
    const uint32_t C = o_.context_tokens, B = o_.block_tokens;
    // Prefill in two chunks: the observed queries' mass alone, and everyone's.
    const uint32_t obs = std::min(o_.observation, C);
    std::vector<float> mass_all(ctx_blocks_, 0.0f), mass_obs(ctx_blocks_, 0.0f);
    if (C > obs) {
      auto head = forward_.run({std::span(p.tokens).first(C - obs), 0, 0, ctx_table_, true, C - obs});
      std::copy(head.block_mass.begin(), head.block_mass.end(), mass_all.begin());
    }
    auto tail = forward_.run({std::span(p.tokens).subspan(C - obs, obs), C - obs, C - obs, ctx_table_, true, obs});
    for (uint32_t b = 0; b < ctx_blocks_; ++b) {
      mass_obs[b] = tail.block_mass[b];
      mass_all[b] += tail.block_mass[b];
    }
    fed += C;

    std::vector<float> future(ctx_blocks_, 0.0f);
    std::vector<outcome> out;
    out.push_back(feed(forward_, p, {}, &future, fed));
    const outcome full = out.front();
    std::map<std::vector<uint32_t>, outcome> seen; // equal drops, equal outcome
    for (const auto& name : o_.policies)
      for (double budget : o_.budgets) {
        block_choice c;
        c.kv_tokens = C;
        c.block_tokens = B;
        c.keep_tokens = static_cast<uint64_t>(std::ceil(budget * C));
        c.seed = splitmix64(o_.seed ^ (index * 0x100000001B3ull));
        c.policy = name;
        // As the engine asks (actors/scheduler_state.cpp): SnapKV the last
        // `observation` queries, the h2o family every query of the last
        // prefill chunk (here the whole context), the others nothing.
        c.mass = mass_all;
        c.mass_queries = C;
        if (name == "snapkv") {
          c.mass = mass_obs;
          c.mass_queries = obs;
        } else if (name == "oracle") {
          c.policy = "h2o_raw"; // the future's mass as it is, nothing protected but the last block
          c.mass = future;
          c.sinks = 0;
          c.recent = 0;
        }
        auto drop = blocks_to_drop(c);
        auto it = seen.find(drop);
        if (it == seen.end())
          it = seen.emplace(drop, drop.empty() ? full : feed(forward_, p, drop, nullptr, fed)).first;
        outcome r = it->second;
        r.mass_kept = mass_kept(future, drop);
        out.push_back(r);
      }
    for (const auto& q : o_.quantizers)
      out.push_back(quantized(q, p, fed));
    return out;
  }

private:
  // Feeds the continuation over the context minus `drop`; `future` (when set)
  // accumulates the continuation's attention per context block.
  outcome feed(model::cpu_forward& forward, const prompt& p, const std::vector<uint32_t>& drop,
               std::vector<float>* future, uint64_t& fed) {
    const uint32_t C = o_.context_tokens, B = o_.block_tokens;
    const auto M = static_cast<uint32_t>(p.tokens.size() - C - 1);
    std::vector<uint32_t> table;
    for (uint32_t b = 0, d = 0; b < ctx_blocks_; ++b) {
      if (d < drop.size() && drop[d] == b) {
        ++d;
        continue;
      }
      table.push_back(b);
    }
    outcome r;
    r.kept_blocks = table.size();
    for (uint32_t b = 0; b < cont_blocks_; ++b)
      table.push_back(ctx_blocks_ + b);
    const uint64_t dropped = uint64_t{drop.size()} * B;
    for (uint32_t i = 0; i < M; ++i) {
      const uint64_t pos = C + i;
      auto res = forward.run({std::span(p.tokens).subspan(pos, 1), pos, pos, table, future != nullptr, 1, dropped});
      bool right = false;
      r.nats += nll(res.logits, p.tokens[pos + 1], right);
      r.correct += right;
      if (future)
        for (uint32_t b = 0; b < ctx_blocks_; ++b)
          (*future)[b] += res.block_mass[b];
    }
    fed += M;
    return r;
  }

  outcome quantized(const std::string& name, const prompt& p, uint64_t& fed) {
    const uint32_t C = o_.context_tokens;
    if (name == "fp8_kv") {
      if (!fp8_) {
        fp8_.emplace(w_.config, ctx_blocks_ + cont_blocks_, o_.block_tokens, true);
        fp8_forward_.emplace(w_, fp8_->view);
      }
      fp8_forward_->run({std::span(p.tokens).first(C), 0, 0, ctx_table_});
      fed += C;
      auto r = feed(*fp8_forward_, p, {}, nullptr, fed);
      r.kept_blocks = ctx_blocks_;
      return r;
    }
    // Every context block's K and V tiles through the codec and back, in bf16.
    const auto s = quant::parse_scheme(name);
    const auto& pool = bf16_.view;
    const quant::tile_shape shape{pool.kv_heads, pool.block_tokens, pool.head_dim};
    std::vector<std::byte> saved(bf16_.bytes);
    std::vector<uint8_t> packed(quant::packed_bytes(*s, shape));
    for (uint32_t b = 0; b < ctx_blocks_; ++b)
      for (uint32_t l = 0; l < pool.layout.layers; ++l)
        for (bool value : {false, true}) {
          auto* tile = reinterpret_cast<uint16_t*>(value ? pool.value(b, l, 0, 0) : pool.key(b, l, 0, 0));
          quant::quantize(*s, shape, tile, packed.data(), quant::element_type::bf16);
          quant::dequantize(*s, shape, packed.data(), tile, quant::element_type::bf16);
        }
    auto r = feed(forward_, p, {}, nullptr, fed);
    r.kept_blocks = ctx_blocks_;
    std::copy(saved.begin(), saved.end(), bf16_.bytes.begin());
    return r;
  }

  const model::llama_weights& w_;
  const quality_options& o_;
  uint32_t ctx_blocks_, cont_blocks_;
  std::vector<uint32_t> ctx_table_;
  model::host_kv_pool bf16_;
  model::cpu_forward forward_;
  std::optional<model::host_kv_pool> fp8_;
  std::optional<model::cpu_forward> fp8_forward_;
};

std::vector<uint32_t> bytes_of(std::string_view s) {
  std::vector<uint32_t> out;
  for (char c : s)
    out.push_back(static_cast<unsigned char>(c)); // bytes, not signed chars
  return out;
}

} // namespace

std::string passkey_intro() {
  return "There is an important piece of information hidden in this text. "
         "Find it and remember it: you will be asked for it.\n";
}

std::string passkey_needle(std::string_view key) {
  return fmt::format("\nThe pass key is {0}. Remember it. {0} is the pass key.\n", key);
}

std::string passkey_question() {
  return "\nWhat is the pass key? The pass key is";
}

const quality_row* quality_report::find(std::string_view name, double budget) const {
  for (const auto& r : rows)
    if (r.name == name && std::abs(r.budget - budget) < 1e-9)
      return &r;
  return nullptr;
}

double quality_report::gap_closed(std::string_view policy, double budget) const {
  const auto *p = find(policy, budget), *random = find("random", budget), *oracle = find("oracle", budget);
  if (!p || !random || !oracle || random->nats_per_byte == oracle->nats_per_byte)
    return NAN;
  return (random->nats_per_byte - p->nats_per_byte) / (random->nats_per_byte - oracle->nats_per_byte);
}

caf::expected<quality_report> measure_quality(const model::llama_weights& weights, std::span<const uint8_t> text,
                                              const quality_options& o) {
  const auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  if (weights.config.vocab < 256)
    return bad(
        fmt::format("the model's vocabulary has {} entries; measuring on bytes needs >= 256", weights.config.vocab));
  if (o.block_tokens == 0 || o.context_tokens == 0 || o.context_tokens % o.block_tokens != 0)
    return bad(fmt::format("context_tokens ({}) must be a positive multiple of block_tokens ({})", o.context_tokens,
                           o.block_tokens));
  if (o.continuation_tokens == 0 || o.windows + o.passkeys == 0)
    return bad("continuation_tokens and windows + passkeys must be positive");
  for (const auto& p : o.policies)
    if (!is_block_policy(p))
      return bad(fmt::format("unknown policy '{}' (expected random, streaming_llm, sliding_window, h2o, h2o_raw, "
                             "h2o_window, snapkv or oracle)",
                             p));
  for (const auto& q : o.quantizers)
    if (q != "fp8_kv" && !quant::parse_scheme(q))
      return bad(fmt::format("unknown quantizer '{}' (expected fp8_kv, fp8_token, fp8_tensor, int8_token, "
                             "int4_token, int4_row or int4_channel)",
                             q));
  for (const auto& q : o.quantizers)
    if (auto s = quant::parse_scheme(q);
        s && !quant::fits(*s, {weights.config.kv_heads, o.block_tokens, weights.config.head_dim}))
      return bad(fmt::format("quantizer '{}' does not fit a block of {} tokens x head_dim {}", q, o.block_tokens,
                             weights.config.head_dim));
  for (double b : o.budgets)
    if (!(b > 0 && b <= 1))
      return bad(fmt::format("budget {} is not in (0, 1]", b));
  const uint32_t C = o.context_tokens, M = o.continuation_tokens;
  const std::string intro = passkey_intro(), question = passkey_question(), needle = passkey_needle("00000");
  const size_t span = size_t{C} + M + 1;
  const size_t frame = intro.size() + needle.size() + question.size();
  if (text.size() < span || (o.passkeys > 0 && C <= frame))
    return bad(fmt::format("the text ({} bytes) is shorter than a window ({} bytes), or the context ({}) holds no "
                           "pass-key filler",
                           text.size(), span, C));

  std::vector<prompt> prompts;
  for (uint32_t i = 0; i < o.windows; ++i) {
    const size_t at = (text.size() - span) * i / o.windows;
    prompts.push_back({{text.begin() + at, text.begin() + at + span}, false});
  }
  const size_t filler = C - frame;
  for (uint32_t i = 0; i < o.passkeys; ++i) {
    const auto key = fmt::format("{:05d}", splitmix64(i + 0x5eed) % 100000);
    const size_t at = (text.size() - filler) * i / o.passkeys;
    const size_t depth = static_cast<size_t>((i + 0.5) / o.passkeys * filler);
    std::string_view body(reinterpret_cast<const char*>(text.data()) + at, filler);
    std::string s = intro + std::string(body.substr(0, depth)) + passkey_needle(key) + std::string(body.substr(depth)) +
        question + " " + key;
    prompts.push_back({bytes_of(s), true});
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<outcome>> results(prompts.size());
  std::vector<uint64_t> fed(prompts.size(), 0);
  std::atomic<size_t> next{0};
  const uint32_t threads = std::max(1u,
                                    std::min<uint32_t>(o.threads ? o.threads : std::thread::hardware_concurrency(),
                                                       static_cast<uint32_t>(prompts.size())));
  auto work = [&] {
    std::optional<prompt_runner> lm, pk;
    for (size_t i; (i = next.fetch_add(1)) < prompts.size();) {
      auto& runner = prompts[i].passkey ? pk : lm;
      if (!runner)
        runner.emplace(weights, o, static_cast<uint32_t>(prompts[i].tokens.size() - C - 1));
      results[i] = runner->run(prompts[i], i, fed[i]);
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (auto& t : pool)
    t.join();

  quality_report report;
  report.options = o;
  report.rows.push_back({"full", 1.0});
  for (const auto& p : o.policies)
    for (double b : o.budgets)
      report.rows.push_back({p, b});
  for (const auto& q : o.quantizers)
    report.rows.push_back({q, 1.0});
  for (auto& r : report.rows)
    r.mass_kept = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    report.tokens_fed += fed[i];
    const auto targets = static_cast<double>(prompts[i].tokens.size() - C - 1);
    for (size_t k = 0; k < report.rows.size(); ++k) {
      auto& row = report.rows[k];
      const auto& r = results[i][k];
      row.kept_blocks += r.kept_blocks;
      if (prompts[i].passkey) {
        row.passkey_nats += r.nats / targets / o.passkeys;
        row.passkey_accuracy += (r.correct == targets ? 1.0 : 0.0) / o.passkeys;
      } else {
        row.nats_per_byte += r.nats / targets / o.windows;
        row.mass_kept += r.mass_kept / o.windows;
      }
    }
  }
  if (o.windows > 1)
    for (size_t k = 0; k < report.rows.size(); ++k) {
      double sum = 0, sum2 = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        if (prompts[i].passkey)
          continue;
        const double d = results[i][k].nats - results[i][0].nats; // same targets: the loss difference
        const double per_byte = d / static_cast<double>(prompts[i].tokens.size() - C - 1);
        sum += per_byte;
        sum2 += per_byte * per_byte;
      }
      const double n = o.windows, mean = sum / n;
      report.rows[k].vs_full_stderr = std::sqrt(std::max(0.0, (sum2 / n - mean * mean) * n / (n - 1)) / n);
    }
  // Per window, per row: the loss per byte; the gap's error from the paired differences.
  const auto per_byte = [&](size_t i, size_t k) {
    return results[i][k].nats / static_cast<double>(prompts[i].tokens.size() - C - 1);
  };
  for (size_t k = 0; k < report.rows.size(); ++k) {
    auto& row = report.rows[k];
    row.gap_closed_stderr = NAN;
    size_t random = report.rows.size(), oracle = report.rows.size();
    for (size_t j = 0; j < report.rows.size(); ++j)
      if (std::abs(report.rows[j].budget - row.budget) < 1e-9) {
        if (report.rows[j].name == "random")
          random = j;
        if (report.rows[j].name == "oracle")
          oracle = j;
      }
    if (random == report.rows.size() || oracle == report.rows.size() || o.windows < 2)
      continue;
    double sum = 0, sum2 = 0, reach = 0;     // reach: random - oracle, summed
    for (size_t i = 0; i < o.windows; ++i) { // the loss windows come first
      const double d = per_byte(i, random) - per_byte(i, k);
      sum += d;
      sum2 += d * d;
      reach += per_byte(i, random) - per_byte(i, oracle);
    }
    const double n = o.windows, mean = sum / n;
    if (reach != 0)
      row.gap_closed_stderr =
          std::sqrt(std::max(0.0, (sum2 / n - mean * mean) * n / (n - 1)) / n) / std::abs(reach / n);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

} // namespace kvtier::compression
