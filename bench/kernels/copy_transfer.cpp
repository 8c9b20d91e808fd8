// bench/transfer: moving 4,096 scattered KV blocks between HBM and pinned
// DRAM, each way and both at once, at 32 KiB, 256 KiB and 2 MiB per block:
//   (a) one large contiguous cudaMemcpyAsync (the link reference)
//   (b) one cudaMemcpyAsync per block
//   (c) cudaMemcpyBatchAsync
//   (d) kvtier's mover (chooser), plus each of its paths forced
// and how much a bf16 GEMM slows beside each kind of transfer. Prints a table
// and writes JSON (--json PATH). Needs a GPU; exits 0 with a note without one.
// KVTIER_BENCH_SWEEPS=0 skips the split-share, CTA and stream sweeps;
// KVTIER_BENCH_BULK=0 the bulk-copy (TMA) kernel's rows.

#include "kernels/copy/cuda_baselines.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "kernels/copy/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <future>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kvtier;
using namespace kvtier::copy;
namespace bl = kvtier::copy::baseline;
using clock_type = std::chrono::steady_clock;

namespace {

struct row {
  std::string size, direction, method;
  double gbps = 0;
  double reference = 0; // (a) for the same size and direction
  std::string note;
  double wall_reference = 0; // (a') the same copy on the host's clock; set on (d) rows
};

struct settings {
  uint32_t blocks = 4096;
  int reps = 3;
  std::vector<uint64_t> sizes{32ull << 10, 256ull << 10, 2ull << 20};
  std::string json_path;
  int gemm_n = 8192;
  int gemm_iters = 30;
};

std::string size_name(uint64_t b) {
  return b >= (1u << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b >> 10) + " KiB";
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs the requests at once on the mover, waits for all; seconds (median of reps after a warm-up).
struct engine_timing {
  double seconds = 0;
  double submit_us_per_block = 0;
  copy_path path = copy_path::automatic;
  std::string paths; // what each request took, " + " between
};

engine_timing time_engine(tier_mover& m, const std::vector<move_request>& requests, int reps) {
  std::vector<double> total, submit;
  engine_timing out;
  size_t blocks = 0;
  for (const auto& r : requests)
    blocks += r.moves.size();
  for (int rep = 0; rep <= reps; ++rep) {
    std::vector<std::promise<move_result>> landed(requests.size());
    std::vector<move_request> copies = requests; // built before the clock starts
    auto start = clock_type::now();
    for (size_t i = 0; i < copies.size(); ++i)
      m.submit(std::move(copies[i]), [&landed, i](const move_result& r) { landed[i].set_value(r); });
    double submitted = seconds_since(start);
    for (auto& l : landed) {
      auto r = l.get_future().get();
      if (!r.ok) {
        std::fprintf(stderr, "transfer failed: %s\n", r.error.c_str());
        std::exit(2);
      }
      out.path = r.path;
      if (rep == reps)
        out.paths += (out.paths.empty() ? "" : " + ") + std::string{to_string(r.path)};
    }
    double s = seconds_since(start);
    if (rep > 0 || reps == 0) {
      total.push_back(s);
      submit.push_back(submitted / blocks * 1e6);
    }
  }
  out.seconds = median(total);
  out.submit_us_per_block = median(submit);
  return out;
}

uint64_t bytes_of(const std::vector<move_request>& rs, uint64_t block) {
  uint64_t n = 0;
  for (const auto& r : rs)
    n += r.moves.size() * block;
  return n;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s)
    o += (c == '"' || c == '\\') ? std::string{'\\', c} : std::string{c};
  return o;
}

} // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // a run cut short still leaves its lines
  settings cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc)
      cfg.json_path = argv[++i];
    else if (a == "--quick") {
      cfg.blocks = 512;
      cfg.reps = 1;
      cfg.gemm_n = 4096;
    } else {
      std::fprintf(stderr, "usage: transfer [--json PATH] [--quick]\n");
      return 2;
    }
  }
  auto gpu = probe_gpu(0);
  if (!gpu.usable) {
    std::printf("transfer: %s; nothing to measure\n", gpu.reason.c_str());
    return 0;
  }
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::string device = bl::describe_device(0);
  std::printf("kvtier bench/transfer  %s\ndevice: %s\nhost threads: %u\n", date, device.c_str(),
              std::thread::hardware_concurrency());

  std::vector<row> rows;
  std::string extra_json; // per-size details
  bl::compute_probe gemm(cfg.gemm_n);
  double gemm_alone_ms = gemm.run_ms(cfg.gemm_iters, 3);
  std::printf("compute load: %s n=%d: %.2f ms for %d (%.0f TFLOP/s)\n", gemm.what(), cfg.gemm_n, gemm_alone_ms,
              cfg.gemm_iters, gemm.tflops(gemm_alone_ms, cfg.gemm_iters));

  for (uint64_t bs : cfg.sizes) {
    const uint32_t n = cfg.blocks;
    const uint32_t layers = 32; // Llama-3-8B: 32 layers; 2 MiB = 16 tokens of bf16 KV
    const uint32_t slots = 2 * n + 64;
    mover_options o;
    o.shape = {slots, slots, layers, bs / layers};
    o.host_threads = default_host_threads();
    o.calibrate = true;
    auto t0 = clock_type::now();
    std::string why;
    auto m = make_cuda_mover(o, &why);
    if (!m) {
      std::printf("no GPU mover: %s\n", why.c_str());
      return 1;
    }
    double setup_s = seconds_since(t0);
    const auto& costs = m->costs();
    auto sname = size_name(bs);
    std::printf("\n== %s blocks (%u layers x %s): pools 2 x %.1f GiB, set-up and calibration %.1f s\n", sname.c_str(),
                layers, size_name(bs / layers).c_str(), double(slots) * bs / (1ull << 30), setup_s);
    std::printf("   calibrated: DMA paths over %u streams, mapped-memory kernel on %u CTAs\n", costs.dma_streams,
                costs.sm_copy_ctas);
    for (auto [dir, c] : {std::pair{"H2D", &costs.h2d}, std::pair{"D2H", &costs.d2h}})
      std::printf("   calibrated %s: dma_runs %.2f us/run %.1f GB/s | dma_batch %.2f us/run %.1f GB/s | dma_2d %.2f "
                  "us/block %.1f GB/s | host_staged %.3f us/run %.1f GB/s | sm_copy %.3f us/run %.1f GB/s | split %.3f "
                  "us/run %.1f GB/s at DMA share %.1f\n",
                  dir, c->dma_runs.per_run_us, c->dma_runs.gbps, c->dma_batch.per_run_us, c->dma_batch.gbps,
                  c->dma_2d.per_run_us, c->dma_2d.gbps, c->host_staged.per_run_us, c->host_staged.gbps,
                  c->sm_copy.per_run_us, c->sm_copy.gbps, c->split.per_run_us, c->split.gbps, c->split_dma_share);

    std::mt19937_64 rng{bs};
    std::vector<uint32_t> pd(slots), ph(slots);
    std::iota(pd.begin(), pd.end(), 0u);
    std::iota(ph.begin(), ph.end(), 0u);
    std::shuffle(pd.begin(), pd.end(), rng);
    std::shuffle(ph.begin(), ph.end(), rng);
    bl::block_list up{{pd.begin(), pd.begin() + n}, {ph.begin(), ph.begin() + n}, bs};
    bl::block_list down{{pd.begin() + n, pd.begin() + 2 * n}, {ph.begin() + n, ph.begin() + 2 * n}, bs};
    move_request up_r{tier::dram, tier::hbm, {}, 0, 0, 1};
    move_request down_r{tier::hbm, tier::dram, {}, 0, 0, 2};
    for (uint32_t i = 0; i < n; ++i) {
      up_r.moves.push_back({pd[i], ph[i]});
      down_r.moves.push_back({ph[n + i], pd[n + i]});
    }
    void* dev = m->hbm_base();
    std::byte* host = m->dram_base();
    const uint64_t bytes = uint64_t{n} * bs;
    // GB/s of `mover` moving direction d's requests (0 H2D, 1 D2H, 2 both) by the given paths.
    auto measure = [&](tier_mover& mover, int d, copy_path up_path, copy_path down_path) {
      std::vector<move_request> rs;
      if (d != 1)
        rs.push_back(up_r), rs.back().path = up_path;
      if (d != 0)
        rs.push_back(down_r), rs.back().path = down_path;
      return bytes_of(rs, bs) / time_engine(mover, rs, cfg.reps).seconds / 1e9;
    };
    // A mover like `m` with the calibrated costs, changed by `adjust`, without calibrating again.
    auto variant = [&](auto&& adjust) {
      mover_options v = o;
      v.calibrate = false;
      v.costs = m->costs();
      v.sm_copy_ctas = m->costs().sm_copy_ctas;
      v.dma_streams = m->costs().dma_streams;
      adjust(v);
      return make_cuda_mover(v, &why);
    };

    double ref[3], wall_ref[3];
    const char* dname[3] = {"H2D", "D2H", "both"};
    const bl::direction dirs[3] = {bl::direction::h2d, bl::direction::d2h, bl::direction::both};
    for (int d = 0; d < 3; ++d) {
      ref[d] = bl::contiguous_gbps(dev, host, bytes, dirs[d], cfg.reps);
      rows.push_back({sname, dname[d], "(a) one contiguous cudaMemcpyAsync", ref[d], ref[d], ""});
    }
    // (d) is timed on the host's clock (submit to callback); (a') times the
    // reference the same way, so the two ratios bracket the engine's overhead.
    for (int d = 0; d < 3; ++d) {
      wall_ref[d] = bl::contiguous_gbps(dev, host, bytes, dirs[d], cfg.reps, true);
      rows.push_back({sname, dname[d], "(a') the same, host clock", wall_ref[d], ref[d], "enqueue to streams idle"});
    }
    for (int d = 0; d < 3; ++d)
      rows.push_back({sname, dname[d], "(b) cudaMemcpyAsync per block",
                      bl::per_block_gbps(dev, host, up, down, dirs[d], cfg.reps), ref[d], "no layout change"});
    for (int d = 0; d < 3; ++d)
      rows.push_back({sname, dname[d], "(c) cudaMemcpyBatchAsync",
                      bl::batched_gbps(dev, host, up, down, dirs[d], cfg.reps), ref[d], "no layout change"});
    for (int d = 0; d < 3; ++d)
      rows.push_back({sname, dname[d], "(c') cudaMemcpyBatchAsync, no hint",
                      bl::batched_gbps(dev, host, up, down, dirs[d], cfg.reps, true), ref[d],
                      "no layout change; driver may use SMs"});

    // The mover: known patterns in, checked after (d).
    for (uint32_t i = 0; i < n; ++i)
      for (uint64_t w = 0; w < bs; w += 8) {
        uint64_t v = (uint64_t{pd[i]} << 32) ^ w ^ 0x5a5a5a5a00000000ull;
        std::memcpy(host + uint64_t{pd[i]} * bs + w, &v, 8);
      }
    double submit_us = 0;
    copy_path chosen[3] = {};
    for (int d = 0; d < 3; ++d) {
      std::vector<move_request> rs;
      if (d != 1)
        rs.push_back(up_r);
      if (d != 0)
        rs.push_back(down_r);
      auto t = time_engine(*m, rs, cfg.reps);
      chosen[d] = t.path;
      if (d == 0)
        submit_us = t.submit_us_per_block;
      std::string note = "chooser: " + t.paths;
      rows.push_back(
          {sname, dname[d], "(d) kvtier mover", bytes_of(rs, bs) / t.seconds / 1e9, ref[d], note, wall_ref[d]});
    }
    // Check a sample of what (d) moved up (HBM is layer-major: read_slot reassembles).
    {
      std::vector<std::byte> blk(bs);
      int bad = 0;
      for (uint32_t i = 0; i < n; i += std::max(1u, n / 64)) {
        m->read_slot(tier::hbm, ph[i], blk);
        for (uint64_t w = 0; w < bs; w += 8) {
          uint64_t v;
          std::memcpy(&v, blk.data() + w, 8);
          bad += v != ((uint64_t{pd[i]} << 32) ^ w ^ 0x5a5a5a5a00000000ull);
        }
      }
      std::printf("   byte check of (d) H2D sample: %s\n", bad == 0 ? "ok" : "MISMATCH");
      if (bad)
        return 1;
    }
    for (auto path : {copy_path::dma_runs, copy_path::dma_batch, copy_path::dma_2d, copy_path::host_staged,
                      copy_path::sm_copy, copy_path::split})
      for (int d = 0; d < 3; ++d) {
        if (d == 2 && path != copy_path::host_staged && path != copy_path::sm_copy && path != copy_path::split &&
            path != copy_path::dma_batch)
          continue;
        rows.push_back({sname, dname[d], std::string{"    mover forced: "} + to_string(path),
                        measure(*m, d, path, path), ref[d], "with layout change"});
      }

    // The mapped-memory kernel on Hopper's bulk copies (TMA) instead of 16-byte loads.
    std::unique_ptr<tier_mover> bulk;
    if (const char* b = std::getenv("KVTIER_BENCH_BULK"); b == nullptr || std::string{b} != "0") {
      bulk = variant([](mover_options& v) { v.bulk_copy = true; });
      for (auto path : {copy_path::sm_copy, copy_path::split})
        for (int d = 0; d < 3; ++d)
          rows.push_back({sname, dname[d], std::string{"    mover forced: "} + to_string(path) + " (bulk copies)",
                          measure(*bulk, d, path, path), ref[d], "with layout change"});
      if (bs == cfg.sizes.front()) {
        std::printf("   bulk-copy kernel (sm_copy) by CTAs, GB/s H2D/D2H:");
        for (unsigned ctas : {2u, 4u, 8u, 16u, 32u}) {
          auto cm = variant([&](mover_options& v) { v.bulk_copy = true, v.sm_copy_ctas = ctas; });
          std::printf(" %u: %.1f/%.1f", ctas, measure(*cm, 0, copy_path::sm_copy, copy_path::sm_copy),
                      measure(*cm, 1, copy_path::sm_copy, copy_path::sm_copy));
        }
        std::printf("\n");
      }
    }

    // Both directions at once with a different path each way.
    for (auto [up_path, down_path] :
         {std::pair{copy_path::split, copy_path::dma_batch}, std::pair{copy_path::dma_batch, copy_path::split},
          std::pair{copy_path::sm_copy, copy_path::dma_batch}, std::pair{copy_path::dma_batch, copy_path::sm_copy}}) {
      rows.push_back({sname, "both",
                      std::string{"    mover forced: "} + to_string(up_path) + " up, " + to_string(down_path) + " down",
                      measure(*m, 2, up_path, down_path), ref[2], "with layout change"});
    }

    // The DMA share of split chunks (fresh movers with the calibrated costs).
    std::string share_json;
    const char* sweeps_env = std::getenv("KVTIER_BENCH_SWEEPS");
    const bool sweeps = sweeps_env == nullptr || std::string{sweeps_env} != "0";
    if (sweeps && bs < (2ull << 20)) {
      std::printf("   split by DMA share, GB/s H2D/D2H/both:");
      for (double share : {0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}) {
        auto sm =
            variant([&](mover_options& v) { v.costs->h2d.split_dma_share = v.costs->d2h.split_dma_share = share; });
        double g[3];
        for (int d = 0; d < 3; ++d)
          g[d] = measure(*sm, d, copy_path::split, copy_path::split);
        std::printf(" %.1f: %.1f/%.1f/%.1f", share, g[0], g[1], g[2]);
        char b2[160];
        std::snprintf(b2, sizeof b2, "%s{\"dma_share\": %.2f, \"h2d\": %.2f, \"d2h\": %.2f, \"both\": %.2f}",
                      share_json.empty() ? "" : ", ", share, g[0], g[1], g[2]);
        share_json += b2;
      }
      std::printf("\n   split by kernel CTAs at the calibrated share, GB/s H2D/D2H/both:");
      for (unsigned ctas : {4u, 8u, 16u, 32u}) {
        auto sm = variant([&](mover_options& v) { v.sm_copy_ctas = ctas; });
        double g[3];
        for (int d = 0; d < 3; ++d)
          g[d] = measure(*sm, d, copy_path::split, copy_path::split);
        std::printf(" %u: %.1f/%.1f/%.1f", ctas, g[0], g[1], g[2]);
      }
      std::printf("\n");
    }

    // How many CTAs the mapped-memory kernel needs to fill the link.
    std::string sweep, staged_json;
    if (bs == cfg.sizes.front()) {
      std::printf("   copy kernel over mapped memory, %s blocks, GB/s by CTAs:", sname.c_str());
      for (unsigned ctas : {1u, 2u, 4u, 8u, 16u, 32u, 132u}) {
        double h = bl::sm_copy_gbps(dev, host, up, bl::direction::h2d, ctas, cfg.reps);
        double dd = bl::sm_copy_gbps(dev, host, down, bl::direction::d2h, ctas, cfg.reps);
        std::printf(" %u: %.1f/%.1f", ctas, h, dd);
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s{\"ctas\": %u, \"h2d_gbps\": %.2f, \"d2h_gbps\": %.2f}",
                      sweep.empty() ? "" : ", ", ctas, h, dd);
        sweep += buf;
      }
      std::printf("  (H2D/D2H)\n   layout-convert kernel HBM->HBM, GB/s moved by CTAs:");
      for (unsigned ctas : {4u, 8u, 16u, 32u, 132u})
        std::printf(" %u: %.0f", ctas, bl::hbm_copy_gbps(dev, std::min<uint64_t>(bytes, 1ull << 30), ctas, cfg.reps));
      std::printf("\n");

      // DMA paths spread over K streams (fresh movers, no calibration).
      std::printf("   DMA paths by streams, GB/s H2D/D2H/both:");
      for (uint32_t k : {1u, 2u, 4u, 8u}) {
        if (!sweeps)
          break;
        mover_options mo = o;
        mo.calibrate = false;
        mo.dma_streams = k;
        auto sm = make_cuda_mover(mo, &why);
        std::printf("\n     %u:", k);
        for (auto path : {copy_path::dma_batch, copy_path::dma_runs, copy_path::dma_2d}) {
          double g[3];
          for (int d = 0; d < 3; ++d)
            g[d] = measure(*sm, d, path, path);
          std::printf(" %s %.1f/%.1f/%.1f", to_string(path), g[0], g[1], g[2]);
          char b2[200];
          std::snprintf(b2, sizeof b2,
                        "%s{\"streams\": %u, \"path\": \"%s\", \"h2d\": %.2f, \"d2h\": %.2f, \"both\": %.2f}",
                        staged_json.empty() ? "" : ", ", k, to_string(path), g[0], g[1], g[2]);
          staged_json += b2;
        }
      }
      std::printf("\n");
    }

    // Compute beside transfers: a background thread repeats a prefetch-sized
    // transfer while the GEMM runs.
    uint32_t prefetch = static_cast<uint32_t>(std::min<uint64_t>(n, (256ull << 20) / bs));
    auto slice = [&](move_request r, copy_path p, bool spare_sms = false) {
      r.moves.resize(prefetch);
      r.path = p;
      r.spare_sms = spare_sms;
      return r;
    };
    struct load_case {
      const char* name;
      std::vector<move_request> requests;
      bool contiguous_dma;
    };
    std::vector<load_case> loads{
        {"mover H2D prefetch (chooser)", {slice(up_r, copy_path::automatic, true)}, false},
        {"mover both directions (chooser)",
         {slice(up_r, copy_path::automatic), slice(down_r, copy_path::automatic)},
         false},
        {"mover H2D forced sm_copy", {slice(up_r, copy_path::sm_copy)}, false},
        {"mover H2D forced split", {slice(up_r, copy_path::split)}, false},
        {"mover H2D on demand (chooser)", {slice(up_r, copy_path::automatic)}, false},
        {"mover H2D forced dma_batch", {slice(up_r, copy_path::dma_batch)}, false},
        {"mover H2D forced dma_2d", {slice(up_r, copy_path::dma_2d)}, false},
        {"one contiguous DMA H2D", {}, true},
    };
    std::string interference;
    double alone = gemm.run_ms(cfg.gemm_iters, 3);
    std::printf("   compute beside transfers (%s, %d per run):", gemm.what(), cfg.gemm_iters);
    // Alone and beside alternate three times; each figure is a median, so
    // clock and power drift lands on both sides.
    auto beside = [&](const char* name, tier_mover* mover, const std::vector<move_request>& requests) {
      std::vector<double> alone_ms, beside_ms, link;
      for (int round = 0; round < 3; ++round) {
        alone_ms.push_back(gemm.run_ms(cfg.gemm_iters, 1));
        std::atomic<bool> stop{false};
        std::atomic<uint64_t> moved{0};
        std::thread bg([&] {
          while (!stop) {
            if (mover == nullptr) {
              bl::contiguous_gbps(dev, host, uint64_t{prefetch} * bs, bl::direction::h2d, 1);
              moved += 2 * uint64_t{prefetch} * bs;
              continue;
            }
            time_engine(*mover, requests, 0);
            moved += bytes_of(requests, bs);
          }
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        auto start = clock_type::now();
        beside_ms.push_back(gemm.run_ms(cfg.gemm_iters, 1));
        double span = seconds_since(start);
        link.push_back(moved.load() / span / 1e9);
        stop = true;
        bg.join();
      }
      double a_ms = median(alone_ms), b_ms = median(beside_ms), l = median(link);
      double slow = (b_ms / a_ms - 1) * 100;
      std::printf("\n     %-40s GEMM %.2f ms alone, %.2f beside: %+5.1f%%   link %.1f GB/s", name, a_ms, b_ms, slow, l);
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "%s{\"load\": \"%s\", \"gemm_alone_ms\": %.3f, \"gemm_beside_ms\": %.3f, \"slowdown_pct\": %.2f, "
                    "\"link_gbps\": %.2f}",
                    interference.empty() ? "" : ", ", name, a_ms, b_ms, slow, l);
      interference += buf;
    };
    for (auto& lc : loads)
      beside(lc.name, lc.contiguous_dma ? nullptr : m.get(), lc.requests);
    if (bulk)
      beside("mover H2D forced sm_copy (bulk copies)", bulk.get(), {slice(up_r, copy_path::sm_copy)});
    if (bs == cfg.sizes.front()) {
      // The layout-convert kernel's CTAs against compute, on the staged path.
      static const char* names[] = {"dma_batch H2D, convert on 4 CTAs", "dma_batch H2D, convert on 64 CTAs",
                                    "sm_copy H2D on 2 CTAs", "sm_copy H2D on 4 CTAs", "sm_copy H2D on 8 CTAs"};
      for (int i = 0; i < 5; ++i) {
        mover_options mo = o;
        mo.calibrate = false;
        mo.dma_streams = costs.dma_streams;
        if (i < 2)
          mo.convert_ctas = i == 0 ? 4 : 64;
        else
          mo.sm_copy_ctas = i == 2 ? 2 : i == 3 ? 4 : 8;
        auto cm = make_cuda_mover(mo, &why);
        beside(names[i], cm.get(), {slice(up_r, i < 2 ? copy_path::dma_batch : copy_path::sm_copy)});
      }
    }
    std::printf("\n");
    char buf[8192];
    std::snprintf(
        buf, sizeof buf,
        "%s    {\"block_bytes\": %llu, \"blocks\": %u, \"layers\": %u, \"submit_us_per_block\": %.4f, "
        "\"chosen\": {\"h2d\": \"%s\", \"d2h\": \"%s\"}, \"gemm_alone_ms\": %.3f, \"interference\": [%s], "
        "\"sm_copy_ctas_sweep\": [%s], \"dma_streams_sweep\": [%s], \"split_share_sweep\": [%s], \"split_dma_share\": "
        "{\"h2d\": %.2f, \"d2h\": %.2f}, \"split\": {\"h2d\": [%.3f, %.2f], \"d2h\": [%.3f, %.2f]}, \"dma_streams\": "
        "%u, \"sm_copy_ctas\": %u, \"calibrated\": {\"h2d\": {\"dma_runs\": [%.3f, %.2f], \"dma_batch\": "
        "[%.3f, %.2f], \"dma_2d\": [%.3f, %.2f], \"host_staged\": [%.3f, %.2f], \"sm_copy\": [%.3f, %.2f]}, "
        "\"d2h\": {\"dma_runs\": [%.3f, %.2f], \"dma_batch\": [%.3f, %.2f], \"dma_2d\": [%.3f, %.2f], "
        "\"host_staged\": [%.3f, %.2f], \"sm_copy\": [%.3f, %.2f]}}}",
        extra_json.empty() ? "" : ",\n", static_cast<unsigned long long>(bs), n, layers, submit_us,
        to_string(chosen[0]), to_string(chosen[1]), alone, interference.c_str(), sweep.c_str(), staged_json.c_str(),
        share_json.c_str(), costs.h2d.split_dma_share, costs.d2h.split_dma_share, costs.h2d.split.per_run_us,
        costs.h2d.split.gbps, costs.d2h.split.per_run_us, costs.d2h.split.gbps, costs.dma_streams, costs.sm_copy_ctas,
        costs.h2d.dma_runs.per_run_us, costs.h2d.dma_runs.gbps, costs.h2d.dma_batch.per_run_us,
        costs.h2d.dma_batch.gbps, costs.h2d.dma_2d.per_run_us, costs.h2d.dma_2d.gbps, costs.h2d.host_staged.per_run_us,
        costs.h2d.host_staged.gbps, costs.h2d.sm_copy.per_run_us, costs.h2d.sm_copy.gbps, costs.d2h.dma_runs.per_run_us,
        costs.d2h.dma_runs.gbps, costs.d2h.dma_batch.per_run_us, costs.d2h.dma_batch.gbps, costs.d2h.dma_2d.per_run_us,
        costs.d2h.dma_2d.gbps, costs.d2h.host_staged.per_run_us, costs.d2h.host_staged.gbps,
        costs.d2h.sm_copy.per_run_us, costs.d2h.sm_copy.gbps);
    extra_json += buf;
    std::printf("   submit cost: %.3f us per block (goal <= 0.2)\n", submit_us);
  }

  std::printf("\n%-8s %-5s %-40s %8s %8s  %s\n", "block", "dir", "method", "GB/s", "% of (a)", "note");
  for (const auto& r : rows) {
    std::string verdict;
    if (r.method.rfind("(d)", 0) == 0) {
      char b[96];
      std::snprintf(b, sizeof b, "  [>= 95%% of (a): %s; %.1f%% of (a'): %s]",
                    r.gbps >= 0.95 * r.reference ? "yes" : "NO", 100 * r.gbps / r.wall_reference,
                    r.gbps >= 0.95 * r.wall_reference ? "yes" : "NO");
      verdict = b;
    }
    std::printf("%-8s %-5s %-40s %8.1f %7.1f%%  %s%s\n", r.size.c_str(), r.direction.c_str(), r.method.c_str(), r.gbps,
                100 * r.gbps / r.reference, r.note.c_str(), verdict.c_str());
  }

  if (!cfg.json_path.empty()) {
    FILE* f = std::fopen(cfg.json_path.c_str(), "w");
    if (!f) {
      std::perror(cfg.json_path.c_str());
      return 1;
    }
    std::fprintf(
        f, "{\n  \"bench\": \"transfer\",\n  \"date\": \"%s\",\n  \"device\": \"%s\",\n  \"gemm\": \"%s n=%d\",\n",
        date, json_escape(device).c_str(), gemm.what(), cfg.gemm_n);
    std::fprintf(f, "  \"rows\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::fprintf(
          f,
          "    {\"block\": \"%s\", \"direction\": \"%s\", \"method\": \"%s\", \"gbps\": %.2f, \"pct_of_contiguous\": "
          "%.1f, \"pct_of_contiguous_host_clock\": %.1f, \"note\": \"%s\"}%s\n",
          r.size.c_str(), r.direction.c_str(), json_escape(r.method).c_str(), r.gbps, 100 * r.gbps / r.reference,
          r.wall_reference > 0 ? 100 * r.gbps / r.wall_reference : 0.0, json_escape(r.note).c_str(),
          i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"sizes\": [\n%s\n  ]\n}\n", extra_json.c_str());
    std::fclose(f);
    std::printf("\nJSON: %s\n", cfg.json_path.c_str());
  }
  return 0;
}
