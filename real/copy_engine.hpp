#pragma once
// kvtier::copy_engine (actors/seam.hpp) over a tier_mover: the GPU mover
// when a usable GPU is found, else the CPU twin, with a message saying why.
//
//   kvtier::copy_engine_options o;
//   o.shape = {hbm_slots, dram_slots, layers, layer_bytes};
//   auto engine = kvtier::make_copy_engine(o);   // never null
//   engine->submit(job, self);                   // -> (completion_atom, tag, bytes, error)

#include "kernels/copy/mover.hpp"
#include "actors/seam.hpp"
#include "runtime/hardware.hpp"

#include <functional>
#include <memory>
#include <string>

namespace kvtier {

struct copy_engine_options {
  copy::pool_shape shape;
  /// "auto" (GPU if usable, else CPU twin), "cuda" (same, but says louder
  /// when it falls back), or "cpu" (always the twin).
  std::string device = "auto";
  int gpu = 0;
  /// Tuning; its shape and device are taken from the fields above.
  copy::mover_options tuning;
  /// When set and tuning.calibrate is false, the chooser starts from these
  /// link figures (a hardware profile written by `kvtier calibrate`).
  const hardware_profile* profile = nullptr;
  /// Where the fallback message goes (default: stderr).
  std::function<void(const std::string&)> log;
};

class tier_copy_engine final : public copy_engine {
public:
  tier_copy_engine(std::unique_ptr<copy::tier_mover> mover, std::string fallback_reason);

  // -- copy_engine ----------------------------------------------------------
  void submit(copy_job job, caf::actor notify) override;
  /// Blocks' traffic since the engine started (its calibration left out).
  link_counters h2d_counters() const override;
  link_counters d2h_counters() const override;

  // -- beyond the seam --------------------------------------------------------
  /// Layer streaming: moves only layers [first_layer, first_layer + layer_count)
  /// of each block (e.g. into HBM staging slots, layer by layer, for contexts
  /// that do not fit HBM). One completion per call.
  void submit_layers(copy_job job, uint32_t first_layer, uint32_t layer_count, caf::actor notify,
                     bool spare_sms = true);
  /// Blocks until every submitted job has completed.
  void drain() { mover_->drain(); }

  std::string name() const { return mover_->name(); }
  bool on_gpu() const { return mover_->on_gpu(); }
  /// Why the CPU twin runs instead of the GPU mover; empty when on the GPU
  /// or when the twin was asked for.
  const std::string& fallback_reason() const { return fallback_reason_; }

  /// The DRAM pool: block-major, 4 KiB aligned (the NVMe page store registers it).
  std::byte* dram_base() { return mover_->dram_base(); }
  void* hbm_base() { return mover_->hbm_base(); }
  const tier_layout& layout(tier t) const { return mover_->layout(t); }
  void write_slot(tier t, uint32_t slot, std::span<const std::byte> block) { mover_->write_slot(t, slot, block); }
  void read_slot(tier t, uint32_t slot, std::span<std::byte> block) { mover_->read_slot(t, slot, block); }
  uint64_t slot_checksum(tier t, uint32_t slot);

  copy::tier_mover& mover() { return *mover_; }
  /// Which copy paths moved the blocks since the engine took the mover over,
  /// per direction: requests, bytes and GB/s on the link, e.g.
  /// "device->host: dma_2d 494 requests, 58.9 GiB, 9.5 GB/s on the link".
  std::string paths_summary() const;

private:
  std::unique_ptr<copy::tier_mover> mover_;
  std::string fallback_reason_;
  // What the mover had moved when the engine took it over: its start-up
  // calibration of the copy paths (tens of GiB on a GPU), which is no
  // block's traffic and stays out of the link counters.
  link_counters h2d_at_start_;
  link_counters d2h_at_start_;
  copy::link_stats h2d_stats_at_start_;
  copy::link_stats d2h_stats_at_start_;
};

/// The GPU engine when a usable GPU is found, else the CPU twin. Never null.
std::unique_ptr<tier_copy_engine> make_copy_engine(const copy_engine_options& options);

} // namespace kvtier
