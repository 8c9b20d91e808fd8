// A CUDA client of kvtierd, as an engine would be one: the region the client
// maps is registered with cudaHostRegister, so KV moves between HBM and the
// daemon's shared memory by DMA, and no block byte crosses the socket.
// A plain program (exit 0 pass, 1 fail, 2 usage, 77 skipped: no GPU usable):
//
//   client_cuda_check <socket or host:port> <tenant> <token> [blocks]
//
// Checked, every byte: blocks written in HBM, copied device-to-host into the
// registered region, stored (batch_set), read back by a second connection of
// the same tenant into its own registered region (batch_get), copied
// host-to-device into other HBM, equal the originals (FNV-1a per block on the
// host, and a byte compare). Printed beside it, in the same run: GB/s of the
// same copies into a registered region and into plain pageable memory, the
// reason to register.

#include "client/client.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using kvtier::client::block_key;
using kvtier::client::client;

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess)
    return true;
  std::fprintf(stderr, "client_cuda_check: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

std::uint64_t fnv1a(const std::byte* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ std::to_integer<std::uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

// GB/s of one device-to-host copy of `bytes` into `host`, best of three.
double d2h_gbps(void* host, const void* device, std::size_t bytes) {
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!cuda_ok(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "timed copy"))
      return 0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(bytes) / s / 1e9);
  }
  return best;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: client_cuda_check <socket or host:port> <tenant> <token> [blocks]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("client_cuda_check: no GPU usable: skipped\n");
    return 77;
  }
  const std::size_t n = argc > 4 ? std::stoul(argv[4]) : 64;
  auto writer = client::connect(argv[1], argv[2], argv[3]);
  auto reader = client::connect(argv[1], argv[2], argv[3]);
  if (!writer || !reader) {
    std::fprintf(stderr, "client_cuda_check: %s\n", (!writer ? writer.err() : reader.err()).what().c_str());
    return 1;
  }
  const std::size_t block = writer->block_bytes(), bytes = n * block;
  auto wr = writer->map_region(bytes);
  auto rr = reader->map_region(bytes);
  if (!wr || !rr) {
    std::fprintf(stderr, "client_cuda_check: map_region: %s\n", (!wr ? wr.err() : rr.err()).what().c_str());
    return 1;
  }
  std::byte* out = (*wr)->data();
  std::byte* in = (*rr)->data();
  if (!cuda_ok(cudaHostRegister(out, (*wr)->size(), cudaHostRegisterDefault), "cudaHostRegister (writer)") ||
      !cuda_ok(cudaHostRegister(in, (*rr)->size(), cudaHostRegisterDefault), "cudaHostRegister (reader)"))
    return 1;

  // The KV in HBM: a pattern that differs per block and per byte.
  std::vector<std::byte> pattern(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    pattern[i] = std::byte(static_cast<unsigned char>((i * 2654435761u) >> 13 ^ i / block));
  void *src = nullptr, *dst = nullptr;
  if (!cuda_ok(cudaMalloc(&src, bytes), "cudaMalloc") || !cuda_ok(cudaMalloc(&dst, bytes), "cudaMalloc") ||
      !cuda_ok(cudaMemcpy(src, pattern.data(), bytes, cudaMemcpyHostToDevice), "fill HBM") ||
      !cuda_ok(cudaMemset(dst, 0, bytes), "clear HBM"))
    return 1;

  // Offload: HBM -> registered region (DMA), then the daemon takes the blocks.
  if (!cuda_ok(cudaMemcpy(out, src, bytes, cudaMemcpyDeviceToHost), "HBM -> region"))
    return 1;
  std::vector<block_key> keys;
  std::vector<std::uint64_t> offsets;
  for (std::size_t i = 0; i < n; ++i) {
    keys.push_back({0xc0da0000 + i, 0x5eed});
    offsets.push_back(i * block);
  }
  auto stored = writer->batch_set(keys, offsets);
  if (!stored) {
    std::fprintf(stderr, "client_cuda_check: batch_set: %s\n", stored.err().what().c_str());
    return 1;
  }
  // Load, on another connection: the daemon writes the reader's region, then DMA to HBM.
  auto held = reader->batch_exists(keys);
  auto found = reader->batch_get(keys, offsets);
  if (!held || !found) {
    std::fprintf(stderr, "client_cuda_check: %s\n", (!held ? held.err() : found.err()).what().c_str());
    return 1;
  }
  if (!cuda_ok(cudaMemcpy(dst, in, bytes, cudaMemcpyHostToDevice), "region -> HBM"))
    return 1;
  std::vector<std::byte> back(bytes);
  if (!cuda_ok(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost), "read back HBM"))
    return 1;
  std::size_t acked = 0, got = 0, intact = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acked += (*stored)[i] ? 1 : 0;
    got += (*found)[i] ? 1 : 0;
    intact += fnv1a(back.data() + i * block, block) == fnv1a(pattern.data() + i * block, block) &&
            std::memcmp(back.data() + i * block, pattern.data() + i * block, block) == 0
        ? 1
        : 0;
  }

  // Why register: the same device-to-host copy into the registered region and into pageable memory.
  std::vector<std::byte> pageable(bytes);
  const double registered_gbps = d2h_gbps(out, src, bytes);
  const double pageable_gbps = d2h_gbps(pageable.data(), src, bytes);
  std::printf("client_cuda_check: %zu blocks of %zu B: stored %zu, held %zu, found %zu, intact in HBM %zu\n", n, block,
              acked, *held, got, intact);
  std::printf("client_cuda_check: HBM -> region %.1f GB/s registered, %.1f GB/s pageable (%.2fx)\n", registered_gbps,
              pageable_gbps, pageable_gbps > 0 ? registered_gbps / pageable_gbps : 0.0);
  std::printf("{\"blocks\": %zu, \"block_bytes\": %zu, \"intact\": %zu, \"registered_gbps\": %.2f, "
              "\"pageable_gbps\": %.2f}\n",
              n, block, intact, registered_gbps, pageable_gbps);
  cudaHostUnregister(out);
  cudaHostUnregister(in);
  cudaFree(src);
  cudaFree(dst);
  const bool pass = acked == n && *held == n && got == n && intact == n;
  std::printf("client_cuda_check: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
