// Prefill on GPU 0, decode on GPU 1 (a plain program: exit 0 pass, 1 fail;
// exit 0 with "needs two GPUs: skipped" on a machine with fewer, unless
// KVTIER_PEER_ONE_GPU=1 asks for the one-GPU rehearsal).
//
// For each geometry, with the same weights on both GPUs: prompts are
// prefilled on GPU 0 into its paged pool over a scattered block table; their
// blocks move to GPU 1's pool (other, scattered slots; one prompt's blocks
// adjacent on both sides, so runs coalesce) by the peer copier, three ways
// (cudaMemcpyPeerAsync per run, the kernel pulling, the kernel pushing),
// each into a poisoned pool. Every move must land every moved block's bytes
// (checksum and bytes equal to GPU 0's) and leave every other slot of GPU 1
// poisoned. Then both GPUs decode greedily from the same first token, GPU 1
// from the moved blocks and GPU 0 from its own: the tokens must be identical
// (the same kernels on the same GPU model: the logits are expected
// bit-identical, and their largest difference is printed).

#include "kernels/copy/mover.hpp"
#include "kernels/copy/peer_copy.hpp"
#include "kernels/model/cuda/cuda_forward.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace kvtier;
using namespace kvtier::model;

namespace {

constexpr uint32_t block_tokens = 16;
constexpr unsigned char poison = 0x7f;

/// Prints a failed CUDA call; false then.
bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess)
    return true;
  std::printf("CUDA error: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  return false;
}

/// One GPU's pool: device memory, its layout, and the view the model reads.
// The physical device of each side: {0, 1}, or {0, 0} for a rehearsal on one
// GPU (KVTIER_PEER_ONE_GPU=1): the same plans, kernels, pools and decodes, with
// the "peer" copy inside one device, so all but the link is checked.
int side_device[2] = {0, 1};

struct device_pool {
  int device = 0;
  void* memory = nullptr;
  paged_kv_pool view;

  bool allocate(int d, const llama_config& c, uint32_t slots) {
    device = d;
    view.kv_heads = c.kv_heads;
    view.head_dim = c.head_dim;
    view.block_tokens = block_tokens;
    view.layout = {slot_order::layer_major, slots, c.layers,
                   paged_kv_pool::layer_bytes_for(c.kv_heads, c.head_dim, block_tokens)};
    if (!cuda_ok(cudaSetDevice(d), "cudaSetDevice") ||
        !cuda_ok(cudaMalloc(&memory, view.layout.total_bytes()), "cudaMalloc (pool)") ||
        !cuda_ok(cudaMemset(memory, 0, view.layout.total_bytes()), "cudaMemset (pool)"))
      return false;
    view.base = static_cast<std::byte*>(memory);
    return true;
  }
  ~device_pool() {
    if (memory) {
      cudaSetDevice(device);
      cudaFree(memory);
    }
  }
  copy::peer_pool peer() const { return {view.base, view.layout}; }
  bool fill(unsigned char byte) {
    return cuda_ok(cudaSetDevice(device), "cudaSetDevice") &&
        cuda_ok(cudaMemset(memory, byte, view.layout.total_bytes()), "cudaMemset (poison)") &&
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (poison)");
  }
  bool read(std::vector<std::byte>& host) const {
    host.resize(view.layout.total_bytes());
    return cuda_ok(cudaSetDevice(device), "cudaSetDevice") &&
        cuda_ok(cudaMemcpy(host.data(), memory, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy (read pool)");
  }
  /// Slot `s`'s layers, gathered from a host copy of the pool (block-major order).
  std::vector<std::byte> block(const std::vector<std::byte>& host, uint32_t s) const {
    const auto& l = view.layout;
    std::vector<std::byte> out(l.block_bytes());
    for (uint32_t layer = 0; layer < l.layers; ++layer)
      std::memcpy(out.data() + layer * l.layer_bytes, host.data() + l.offset(s, layer), l.layer_bytes);
    return out;
  }
};

struct geometry {
  const char* name;
  llama_config config;
  bool random_on_gpu; // cuda_forward::create_random (large shapes); else seeded_weights uploaded
  std::vector<uint32_t> prompt_tokens;
  uint32_t decode_steps;
  uint32_t slots0, slots1;
};

llama_config small_config() { // model_cuda_check's tensor-core forward shape
  llama_config c;
  c.vocab = 512;
  c.hidden = 512;
  c.intermediate = 1024;
  c.layers = 2;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 128;
  c.scaling = {true, 8.0, 1.0, 4.0, 64};
  return c;
}

llama_config llama3_8b_layers(uint32_t layers) {
  llama_config c;
  c.vocab = 128256;
  c.hidden = 4096;
  c.intermediate = 14336;
  c.layers = layers;
  c.q_heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.scaling.enabled = true;
  return c;
}

uint32_t blocks_for(uint64_t tokens) {
  return static_cast<uint32_t>((tokens + block_tokens - 1) / block_tokens);
}

/// Block tables over `slots` slots: the first sequence's blocks adjacent from
/// `first_run`, the others' shuffled among the rest.
std::vector<std::vector<uint32_t>> scattered_tables(const std::vector<uint32_t>& blocks, uint32_t slots,
                                                    uint32_t first_run, uint32_t seed) {
  std::vector<uint32_t> free;
  for (uint32_t s = 0; s < slots; ++s)
    if (s < first_run || s >= first_run + blocks[0])
      free.push_back(s);
  std::mt19937 rng(seed);
  std::shuffle(free.begin(), free.end(), rng);
  std::vector<std::vector<uint32_t>> tables(blocks.size());
  size_t next = 0;
  for (uint32_t b = 0; b < blocks[0]; ++b)
    tables[0].push_back(first_run + b);
  for (size_t q = 1; q < blocks.size(); ++q)
    for (uint32_t b = 0; b < blocks[q]; ++b)
      tables[q].push_back(free.at(next++));
  return tables;
}

/// A forward on one GPU, released with that GPU current (its stream, cuBLAS
/// handle and buffers belong to it).
struct forward_on {
  int device = 0;
  std::unique_ptr<cuda_forward> forward;
  ~forward_on() {
    cudaSetDevice(device);
    forward.reset();
  }
};

bool make_forward(const geometry& g, const llama_weights* weights, const device_pool& pool, forward_on& out) {
  std::string why;
  out.device = pool.device;
  if (!cuda_ok(cudaSetDevice(pool.device), "cudaSetDevice"))
    return false;
  out.forward = g.random_on_gpu ? cuda_forward::create_random(g.config, 42, pool.view, why)
                                : cuda_forward::create(*weights, pool.view, why);
  if (!out.forward)
    std::printf("[%s] cuda_forward on GPU %d: %s\n", g.name, pool.device, why.c_str());
  return out.forward != nullptr;
}

uint32_t argmax(const std::vector<float>& v) { // the lowest id among equals, as sample_token
  return static_cast<uint32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

bool check(const geometry& g) {
  const auto& c = g.config;
  std::printf("[%s] %u layers, %u KV heads x head_dim %u, %u-token blocks: %llu bytes per slot per layer\n", g.name,
              c.layers, c.kv_heads, c.head_dim, block_tokens,
              static_cast<unsigned long long>(paged_kv_pool::layer_bytes_for(c.kv_heads, c.head_dim, block_tokens)));
  device_pool pool0, pool1;
  if (!pool0.allocate(side_device[0], c, g.slots0) || !pool1.allocate(side_device[1], c, g.slots1))
    return false;
  llama_weights weights;
  if (!g.random_on_gpu)
    weights = seeded_weights(c, 9);
  forward_on gpu0, gpu1;
  if (!make_forward(g, &weights, pool0, gpu0) || !make_forward(g, &weights, pool1, gpu1))
    return false;

  // Prompts, and tables with room for the decoded tokens.
  const size_t n = g.prompt_tokens.size();
  std::vector<std::vector<uint32_t>> prompts(n);
  std::vector<uint32_t> blocks(n), moved_blocks(n);
  for (size_t q = 0; q < n; ++q) {
    for (uint32_t i = 0; i < g.prompt_tokens[q]; ++i)
      prompts[q].push_back(static_cast<uint32_t>((i * 37 + 11 * q + 1) % c.vocab));
    blocks[q] = blocks_for(g.prompt_tokens[q] + g.decode_steps + 1);
    moved_blocks[q] = blocks_for(g.prompt_tokens[q]);
  }
  auto table0 = scattered_tables(blocks, g.slots0, 5, 1);
  auto table1 = scattered_tables(blocks, g.slots1, g.slots1 / 3, 2);

  // Prefill on GPU 0: the first token comes from its logits, shared by both decodes.
  std::vector<sequence_input> batch(n);
  for (size_t q = 0; q < n; ++q)
    batch[q] = {prompts[q], 0, 0, table0[q], false};
  if (!cuda_ok(cudaSetDevice(side_device[0]), "cudaSetDevice"))
    return false;
  auto prefill = gpu0.forward->run(batch);
  if (!cuda_ok(cudaDeviceSynchronize(), "prefill on GPU 0"))
    return false;

  // The moves: every block holding a prompt token, GPU 0's slot -> GPU 1's.
  std::vector<copy::slot_pair> moves;
  for (size_t q = 0; q < n; ++q)
    for (uint32_t b = 0; b < moved_blocks[q]; ++b)
      moves.push_back({table0[q][b], table1[q][b]});
  std::set<uint32_t> destinations;
  for (const auto& m : moves)
    destinations.insert(m.to_slot);
  std::printf("[%s] prompts of", g.name);
  for (auto t : g.prompt_tokens)
    std::printf(" %u", t);
  std::printf(" tokens prefilled on GPU 0 (%u slots); %zu blocks move to GPU 1 (%u slots)\n", g.slots0, moves.size(),
              g.slots1);
  std::vector<std::byte> host0, host1;
  if (!pool0.read(host0))
    return false;
  bool ok = true;
  struct mode {
    copy::peer_path path;
    bool pull;
  };
  for (auto m :
       {mode{copy::peer_path::dma, false}, mode{copy::peer_path::kernel, true}, mode{copy::peer_path::kernel, false}}) {
    std::string why;
    auto copier = copy::make_cuda_peer_copier({side_device[0], side_device[1], m.path, m.pull, 0}, &why);
    if (!copier) {
      std::printf("[%s] peer copier (%s%s): %s: FAILED\n", g.name, copy::to_string(m.path), m.pull ? ", pull" : "",
                  why.c_str());
      ok = false;
      continue;
    }
    if (!pool1.fill(poison))
      return false;
    auto result = copier->copy({pool0.peer(), pool1.peer(), moves});
    if (!result.ok) {
      std::printf("[%s] %s: FAILED: %s\n", g.name, copier->name().c_str(), result.error.c_str());
      return false;
    }
    if (!pool1.read(host1))
      return false;
    size_t equal = 0, intact = 0, mismatched_bytes = 0;
    for (const auto& mv : moves) {
      auto a = pool0.block(host0, mv.from_slot), b = pool1.block(host1, mv.to_slot);
      const bool same = copy::block_checksum(a) == copy::block_checksum(b) && a == b;
      equal += same;
      if (!same && mismatched_bytes++ < 3)
        std::printf("[%s]   block GPU 0 slot %u -> GPU 1 slot %u differs (checksums %016llx, %016llx)\n", g.name,
                    mv.from_slot, mv.to_slot, static_cast<unsigned long long>(copy::block_checksum(a)),
                    static_cast<unsigned long long>(copy::block_checksum(b)));
    }
    const size_t others = g.slots1 - destinations.size();
    for (uint32_t s = 0; s < g.slots1; ++s) {
      if (destinations.count(s))
        continue;
      auto b = pool1.block(host1, s);
      intact += std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{poison}; });
    }
    const bool mode_ok = equal == moves.size() && intact == others;
    std::printf("[%s] %s: %llu bytes in %llu runs, %llu operations, %.3f ms; moved blocks equal (checksum and bytes) "
                "%zu of %zu; other slots untouched %zu of %zu: %s\n",
                g.name, copier->name().c_str(), static_cast<unsigned long long>(result.bytes),
                static_cast<unsigned long long>(result.runs), static_cast<unsigned long long>(result.operations),
                result.seconds * 1e3, equal, moves.size(), intact, others, mode_ok ? "ok" : "MISMATCH");
    ok = ok && mode_ok;
  }
  // Decode from a pool like GPU 0's: zero where nothing was moved (the tails
  // of fresh blocks, masked by attention, then hold the same bytes on both),
  // the blocks moved by the kernel pushing (the default).
  {
    std::string why;
    auto copier =
        copy::make_cuda_peer_copier({side_device[0], side_device[1], copy::peer_path::kernel, false, 0}, &why);
    if (!copier) // no peer access: still decode after a DMA move, to see the rest
      copier = copy::make_cuda_peer_copier({side_device[0], side_device[1], copy::peer_path::dma, false, 0}, &why);
    if (!copier) {
      std::printf("[%s] peer copier: %s\n", g.name, why.c_str());
      return false;
    }
    if (!pool1.fill(0))
      return false;
    auto result = copier->copy({pool0.peer(), pool1.peer(), moves});
    if (!result.ok) {
      std::printf("[%s] peer copy before decoding: FAILED: %s\n", g.name, result.error.c_str());
      return false;
    }
  }

  // Decode from the same first token: GPU 1 over the moved blocks, GPU 0 over its own.
  std::vector<std::vector<uint32_t>> seq0 = prompts, seq1 = prompts;
  for (size_t q = 0; q < n; ++q) {
    seq0[q].push_back(argmax(prefill[q].logits));
    seq1[q].push_back(argmax(prefill[q].logits));
  }
  float worst = 0;
  for (uint32_t step = 0; step < g.decode_steps; ++step) {
    std::vector<std::vector<sequence_result>> out(2);
    for (int side = 0; side < 2; ++side) {
      auto& seq = side == 0 ? seq0 : seq1;
      auto& table = side == 0 ? table0 : table1;
      for (size_t q = 0; q < n; ++q) {
        const uint64_t position = seq[q].size() - 1;
        batch[q] = {std::span(seq[q]).subspan(position, 1), position, position, table[q], false};
      }
      if (!cuda_ok(cudaSetDevice(side_device[side]), "cudaSetDevice"))
        return false;
      out[side] = (side == 0 ? gpu0 : gpu1).forward->run(batch);
      if (!cuda_ok(cudaDeviceSynchronize(), side == 0 ? "decode on GPU 0" : "decode on GPU 1"))
        return false;
    }
    for (size_t q = 0; q < n; ++q) {
      for (size_t i = 0; i < out[0][q].logits.size(); ++i) {
        const float d = std::abs(out[0][q].logits[i] - out[1][q].logits[i]);
        if (!(d <= worst))
          worst = std::isnan(d) ? INFINITY : d;
      }
      seq0[q].push_back(argmax(out[0][q].logits));
      seq1[q].push_back(argmax(out[1][q].logits));
    }
  }
  size_t same = 0, total = 0;
  for (size_t q = 0; q < n; ++q)
    for (size_t i = prompts[q].size(); i < seq0[q].size(); ++i) {
      ++total;
      same += seq0[q][i] == seq1[q][i];
    }
  const bool tokens_ok = same == total;
  std::printf("[%s] greedy decode, %u steps x %zu prompts: GPU 1 after the move vs GPU 0 without it: tokens %s "
              "(%zu of %zu); max logit difference %.3g%s\n",
              g.name, g.decode_steps, n, tokens_ok ? "identical" : "DIFFER", same, total, worst,
              worst == 0 ? " (bit-identical)" : "");
  std::printf("[%s] %s\n", g.name, ok && tokens_ok ? "PASS" : "FAIL");
  return ok && tokens_ok;
}

} // namespace

int main() {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  const char* one = std::getenv("KVTIER_PEER_ONE_GPU");
  const bool rehearsal = one && std::strcmp(one, "1") == 0 && e == cudaSuccess && devices >= 1;
  if (!rehearsal && (e != cudaSuccess || devices < 2)) {
    std::printf("needs two GPUs (%d usable here): skipped (KVTIER_PEER_ONE_GPU=1 rehearses on one)\n",
                e == cudaSuccess ? devices : 0);
    return 0;
  }
  if (rehearsal) {
    side_device[1] = 0;
    std::printf("one-GPU rehearsal: both sides on GPU 0, the copy stays inside it (no peer link)\n");
  }
  for (int d = 0; d < (rehearsal ? 1 : 2); ++d) {
    cudaDeviceProp prop{};
    if (!cuda_ok(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties"))
      return 1;
    int peer = 0;
    if (!rehearsal)
      cudaDeviceCanAccessPeer(&peer, d, 1 - d);
    std::printf("GPU %d: %s, %d SMs, %.1f GiB; peer access to GPU %d: %s\n", d, prop.name, prop.multiProcessorCount,
                prop.totalGlobalMem / double(1ull << 30), 1 - d, peer ? "yes" : "no");
  }
  const std::vector<geometry> geometries{
      {"small", small_config(), false, {70, 45, 33, 16}, 12, 64, 96},
      {"llama3-8b x4 layers", llama3_8b_layers(4), true, {1000, 257, 2049}, 16, 512, 640},
  };
  bool ok = true;
  for (const auto& g : geometries)
    ok = check(g) && ok;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
