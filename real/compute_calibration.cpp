#include "real/compute_calibration.hpp"

#include "real/copy_engine.hpp"
#include "real/model_compute.hpp"
#include "real/model_shape.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace kvtier {

namespace {

/// One shape of the grid: `decodes` sequences decoding one token after
/// `decode_context` cached ones, and optionally one prefill chunk of
/// `chunk` tokens after `cached` ones.
struct shape {
  uint32_t decodes = 0;
  uint64_t decode_context = 0;
  uint32_t chunk = 0;
  uint64_t cached = 0;
  std::string name() const {
    std::string n;
    if (chunk)
      n = fmt::format("prefill {} after {}", chunk, cached);
    if (decodes)
      n += fmt::format("{}decode b{} c{}", n.empty() ? "" : " + ", decodes, decode_context);
    return n;
  }
};

/// The grid, scaled to the model: GPU-sized for a real model, small for the
/// CPU twin (where a step of a few thousand tokens would take minutes).
std::vector<shape> grid_for(bool gpu, std::vector<double>& knots) {
  if (!gpu) {
    knots = {1, 2, 4, 8, 16, 32, 64};
    return {{1, 16, 0, 0},    {2, 16, 0, 0},   {4, 16, 0, 0},     {8, 16, 0, 0},   {0, 0, 16, 0},   {0, 0, 32, 0},
            {0, 0, 64, 0},    {4, 256, 0, 0},  {8, 512, 0, 0},    {2, 1024, 0, 0}, {0, 0, 16, 256}, {0, 0, 32, 512},
            {0, 0, 16, 1024}, {4, 128, 16, 0}, {8, 256, 32, 128}, {2, 1024, 16, 0}};
  }
  knots = {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  return {{1, 16, 0, 0},         {4, 16, 0, 0},        {16, 16, 0, 0},      {64, 16, 0, 0},      {128, 16, 0, 0},
          {256, 16, 0, 0},       {0, 0, 512, 0},       {0, 0, 1024, 0},     {0, 0, 2048, 0},     {0, 0, 4096, 0},
          {0, 0, 8192, 0},       {1, 32768, 0, 0},     {8, 8192, 0, 0},     {8, 32768, 0, 0},    {32, 8192, 0, 0},
          {64, 8192, 0, 0},      {128, 2048, 0, 0},    {128, 4096, 0, 0},   {0, 0, 512, 8192},   {0, 0, 512, 32768},
          {0, 0, 512, 65536},    {0, 0, 2048, 8192},   {0, 0, 2048, 32768}, {32, 4096, 512, 0},  {64, 2048, 2048, 8192},
          {16, 8192, 512, 8192}, {128, 2048, 2048, 0}, {8, 16384, 2048, 0}, {1, 32768, 2048, 0}, {4, 16384, 512, 8192}};
}

} // namespace

caf::expected<compute_calibration> calibrate_compute(const config& cfg, const compute_calibration_options& o) {
  if (cfg.compute.kind != compute_kind::model)
    return make_error(errc::invalid_config,
                      fmt::format("{}: [compute] kind must be \"model\" to calibrate the model's compute", cfg.source));
  if (o.progress)
    o.progress(fmt::format("timing {} over a grid of step shapes", cfg.geometry.model.name));
  copy_engine_options co;
  co.shape = {cfg.hbm_blocks(), 1, cfg.geometry.model.layers, cfg.geometry.bytes_per_block_layer()};
  co.device = o.device;
  co.profile = &cfg.hardware;
  auto copies = make_copy_engine(co);
  auto weights = model_weights_for(cfg);
  if (!weights)
    return std::move(weights.error());
  auto port = model_compute_port::open(std::move(*weights), *copies, cfg.cache.block_tokens, {}, cfg.geometry.dtype);
  if (!port)
    return std::move(port.error());
  compute_calibration out;
  out.twin = (*port)->kind();
  std::vector<double> knots;
  const auto shapes = grid_for(copies->on_gpu(), knots);
  const uint32_t B = cfg.cache.block_tokens, slots = cfg.hbm_blocks(), vocab = (*port)->needs().vocab_size;
  cost_model roofline_model = [&] {
    config plain = cfg;
    plain.hardware.compute = {};
    return cost_model(plain);
  }();
  for (const auto& sh : shapes) {
    step_plan plan;
    step_shape s;
    uint32_t next_slot = 0;
    auto add = [&](uint64_t id, uint64_t context, uint32_t tokens) {
      step_sequence q{id, tokens, context};
      q.first_position = context;
      for (uint32_t i = 0; i < tokens; ++i)
        q.tokens.push_back(static_cast<uint32_t>((id * 7919 + i * 31 + 1) % vocab));
      for (uint64_t b = 0; b * B < context + tokens; ++b)
        q.block_table.push_back(next_slot++ % slots);
      plan.sequences.push_back(std::move(q));
      s.add(tokens, context);
    };
    if (sh.chunk)
      add(0, sh.cached, sh.chunk);
    for (uint32_t d = 0; d < sh.decodes; ++d)
      add(1 + d, sh.decode_context, 1);
    (*port)->run_now(plan); // warm-up: buffers grow, kernels load
    std::vector<double> times;
    for (int r = 0; r < std::max(1, o.repeats); ++r) {
      auto start = std::chrono::steady_clock::now();
      (*port)->run_now(plan);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    timed_step t;
    t.name = sh.name();
    t.sample.new_tokens = s.new_tokens;
    t.sample.decode_only = s.decode_only();
    t.sample.kv_bytes = static_cast<double>(cfg.geometry.bytes_per_token()) * static_cast<double>(s.decode_kv_tokens);
    const auto& m = cfg.geometry.model;
    t.sample.attention_flops = 4.0 * m.layers * m.query_heads * m.head_dim * s.chunk_attention_pairs;
    t.sample.seconds = times[times.size() / 2];
    t.roofline_seconds = roofline_model.step_seconds(s);
    if (o.progress)
      o.progress(fmt::format("{:<36} {:10.3f} ms", t.name, t.sample.seconds * 1e3));
    out.steps.push_back(std::move(t));
  }
  std::vector<compute_sample> samples;
  for (const auto& t : out.steps)
    samples.push_back(t.sample);
  auto fit = fit_compute(samples, knots, cfg.geometry.model.name, &out.report);
  if (!fit)
    return std::move(fit.error());
  out.fit = std::move(*fit);
  return out;
}

} // namespace kvtier
