// `kvtier calibrate`: measures the PCIe link and the copy engine's paths on
// this machine and writes them into a hardware profile (the format of
// configs/hardware/h200.toml), which the simulator's link model and the real
// engine's chooser both read.
//
//   kvtier calibrate --profile h200 --out configs/hardware/this-machine.toml
//
// Measures: one large pinned copy each way and both at once ([pcie] gbps and
// duplex_gbps), a 4 KiB copy (latency_us), and the per-copy cost of
// per-block DMA at the chosen block size (per_op_us); prints every path's
// fitted cost (copy_plan.hpp) beside them. Needs a GPU.
//
//   kvtier calibrate --compute --config configs/real-model-h200.toml --out h200-llama3-8b.toml
//
// times the config's model behind the real compute port over a grid of step
// shapes (real/compute_calibration.hpp), prints each beside the fit and the
// roofline, and writes the config's hardware profile with a [compute] table:
// a config that names that profile ([hardware] profile) and the same model
// then simulates with the measured forward instead of the roofline.

#include "cli/commands.hpp"
#include "real/compute_calibration.hpp"
#include "real/copy_engine.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "runtime/config.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <memory>
#include <string>

namespace kvtier::cli {
namespace {

struct calibrate_options {
  std::string profile = "h200";
  std::string out; // empty: print to stdout
  std::string block = "2MiB";
  uint32_t layers = 32;
  uint32_t blocks = 512;
  int gpu = 0;
  bool no_measure = false; // write the starting profile back (checks the writer without a GPU)
  bool compute = false;    // time the model instead of the links
  std::string config;      // --compute: the config whose model and hardware profile to use
  std::string device = "auto";
  int repeats = 5;
};

int fail(const std::string& text) {
  fmt::print(stderr, "kvtier calibrate: {}\n", text);
  return 2;
}

// Prints the profile, or writes it to --out (checked).
int emit(const std::string& text, const std::string& out) {
  if (out.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  if (auto err = write_text_file(out, text))
    return fail("--out: " + describe(err));
  fmt::print(stderr, "kvtier calibrate: wrote {}\n", out);
  return 0;
}

int run_compute_calibration(const calibrate_options& o) {
  if (o.config.empty())
    return fail("--compute needs --config FILE: the model and hardware profile to calibrate");
  auto cfg = load_config(o.config);
  if (!cfg)
    return fail(describe(cfg.error()));
  compute_calibration_options co;
  co.device = o.device;
  co.repeats = o.repeats;
  co.progress = [](const std::string& line) { fmt::print(stderr, "  {}\n", line); };
  auto cal = calibrate_compute(*cfg, co);
  if (!cal)
    return fail(describe(cal.error()));
  fmt::print(stderr, "\n{:<36} {:>10} {:>10} {:>8} {:>10} {:>8}\n", "step", "measured", "fitted", "error", "roofline",
             "error");
  double roofline_mean = 0;
  for (const auto& t : cal->steps) {
    const double fitted = predict_seconds(cal->fit, t.sample);
    const double e_fit = (fitted - t.sample.seconds) / t.sample.seconds;
    const double e_roof = (t.roofline_seconds - t.sample.seconds) / t.sample.seconds;
    roofline_mean += std::abs(e_roof) / static_cast<double>(cal->steps.size());
    fmt::print(stderr, "{:<36} {:8.3f}ms {:8.3f}ms {:+7.1f}% {:8.3f}ms {:+7.1f}%\n", t.name, t.sample.seconds * 1e3,
               fitted * 1e3, e_fit * 100, t.roofline_seconds * 1e3, e_roof * 100);
  }
  fmt::print(stderr,
             "{}: fit mean |error| {:.1f}%, max {:.1f}% (the roofline: mean {:.1f}%); decode attention {:.0f} GB/s, "
             "prefill attention {:.1f} TFLOPS{}\n",
             cal->twin, cal->report.mean_relative_error * 100, cal->report.max_relative_error * 100,
             roofline_mean * 100, cal->fit.decode_attention_gbps, cal->fit.prefill_attention_tflops,
             cal->report.note.empty() ? "" : "; " + cal->report.note);
  auto hw = cfg->hardware;
  hw.compute = cal->fit;
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  auto text = hardware_profile_toml(
      hw,
      fmt::format("Hardware profile \"{}\"; [compute] measured by `kvtier calibrate --compute` on {}, {}.", hw.name,
                  date, cal->twin));
  if (auto check = parse_hardware_profile(text, "<calibrate output>"); !check)
    return fail("the profile written does not read back: " + describe(check.error()));
  return emit(text, o.out);
}

int run_calibrate(const calibrate_options& o) {
  if (o.compute)
    return run_compute_calibration(o);
  auto hw = load_hardware_profile(o.profile);
  if (!hw)
    return fail(describe(hw.error()));
  auto block = parse_bytes(o.block);
  if (!block)
    return fail(describe(block.error()));
  if (o.layers == 0 || *block % (16ull * o.layers) != 0)
    return fail(fmt::format("--block {} is not a multiple of 16 bytes per layer ({} layers)", o.block, o.layers));

  if (o.no_measure) {
    auto text = hardware_profile_toml(
        *hw, fmt::format("Hardware profile \"{}\", rewritten by `kvtier calibrate --no-measure`.", hw->name));
    if (auto check = parse_hardware_profile(text, "<calibrate output>"); !check)
      return fail("the profile written does not read back: " + describe(check.error()));
    return emit(text, o.out);
  }
  std::string why;
  auto link = copy::measure_link(o.gpu, &why);
  if (!link)
    return fail(why + "; calibrate measures the PCIe link and needs a GPU");

  copy_engine_options eo;
  eo.shape = {o.blocks, o.blocks, o.layers, *block / o.layers};
  eo.device = "cuda";
  eo.gpu = o.gpu;
  eo.tuning.calibrate = true;
  auto engine = make_copy_engine(eo);
  if (!engine->on_gpu())
    return fail(engine->fallback_reason());
  const auto& c = engine->mover().costs();

  hw->pcie.h2d.gbps = link->h2d_gbps;
  hw->pcie.d2h.gbps = link->d2h_gbps;
  hw->pcie.duplex_gbps = link->duplex_gbps;
  hw->pcie.h2d.latency_us = link->h2d_latency_us;
  hw->pcie.d2h.latency_us = link->d2h_latency_us;
  hw->pcie.h2d.per_op_us = c.h2d.dma_runs.per_run_us;
  hw->pcie.d2h.per_op_us = c.d2h.dma_runs.per_run_us;

  fmt::print(stderr, "kvtier calibrate: {}: H2D {:.1f} GB/s, D2H {:.1f} GB/s, both {:.1f} GB/s\n", engine->name(),
             link->h2d_gbps, link->d2h_gbps, link->duplex_gbps);
  for (auto [dir, d] : {std::pair{"H2D", &c.h2d}, std::pair{"D2H", &c.d2h}})
    for (auto p : {copy::copy_path::dma_runs, copy::copy_path::dma_batch, copy::copy_path::dma_2d,
                   copy::copy_path::host_staged, copy::copy_path::sm_copy, copy::copy_path::split})
      fmt::print(stderr, "  {} {:<12} {:7.3f} us per run, {:6.1f} GB/s ({} blocks)\n", dir, copy::to_string(p),
                 d->of(p).per_run_us, d->of(p).gbps, format_bytes(*block));
  fmt::print(stderr, "  DMA streams {}, mapped-memory kernel CTAs {}, split DMA share H2D {:.1f} D2H {:.1f}\n",
             c.dma_streams, c.sm_copy_ctas, c.h2d.split_dma_share, c.d2h.split_dma_share);

  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  auto text =
      hardware_profile_toml(*hw,
                            fmt::format("Hardware profile \"{}\"; [pcie] measured by `kvtier calibrate` on {}, {}.",
                                        hw->name, date, engine->name()));
  if (auto check = parse_hardware_profile(text, "<calibrate output>"); !check)
    return fail("the profile written does not read back: " + describe(check.error()));
  return emit(text, o.out);
}

} // namespace

command add_calibrate_command(CLI::App& app) {
  auto options = std::make_shared<calibrate_options>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "measure the PCIe link and the copy paths, or the model's forward (--compute); write a hardware profile");
  sub->add_option("--profile", options->profile, "profile to start from: a built-in name or a .toml path")
      ->capture_default_str();
  sub->add_option("--out", options->out, "file to write (default: print to stdout)");
  sub->add_option("--block", options->block, "KV block size to calibrate the copy paths with")->capture_default_str();
  sub->add_option("--layers", options->layers, "layers per block")->capture_default_str()->check(CLI::Range(1, 1024));
  sub->add_option("--blocks", options->blocks, "blocks in each pool while calibrating")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  sub->add_option("--gpu", options->gpu, "CUDA device")->capture_default_str()->check(CLI::Range(0, 1023));
  sub->add_flag("--no-measure", options->no_measure, "write the starting profile back unchanged (no GPU needed)");
  sub->add_flag("--compute", options->compute,
                "time the model of --config over a grid of step shapes and write its fitted compute model");
  sub->add_option("--config", options->config, "--compute: the config whose model and hardware profile to use");
  sub->add_option("--device", options->device, "--compute: auto, cuda or cpu (the model's CPU twin)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  sub->add_option("--repeats", options->repeats, "--compute: timed runs per shape (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  return {sub, [options] { return run_calibrate(*options); }};
}

} // namespace kvtier::cli
