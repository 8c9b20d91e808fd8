#include "kernels/copy/peer_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

namespace kvtier::copy {

const char* to_string(peer_path p) {
  return p == peer_path::kernel ? "kernel" : "dma";
}

namespace {

uint32_t layer_end(const peer_request& r) {
  return r.layer_count == 0 ? r.from.layout.layers : r.first_layer + r.layer_count;
}

} // namespace

std::string check_peer_request(const peer_request& r) {
  const auto &from = r.from.layout, &to = r.to.layout;
  if (r.from.base == nullptr || r.to.base == nullptr)
    return "a pool has no memory";
  if (reinterpret_cast<uintptr_t>(r.from.base) % 16 != 0 || reinterpret_cast<uintptr_t>(r.to.base) % 16 != 0)
    return "pool bases must be 16-byte aligned";
  if (from.layers != to.layers || from.layer_bytes != to.layer_bytes)
    return "the pools differ in layers or layer_bytes";
  if (from.layer_bytes == 0 || from.layer_bytes % 16 != 0)
    return "layer_bytes must be a positive multiple of 16";
  if (r.first_layer >= from.layers || layer_end(r) > from.layers)
    return "the layer range is outside the pools";
  std::unordered_set<uint32_t> destinations;
  for (const auto& m : r.moves) {
    if (m.from_slot >= from.slots || m.to_slot >= to.slots)
      return "a slot is outside its pool";
    if (!destinations.insert(m.to_slot).second)
      return "a destination slot is named twice";
  }
  return {};
}

std::vector<byte_run> peer_runs(const peer_request& r) {
  // Slices in ascending source offset without sorting them: the moves by
  // source slot, then layer by layer (layer-major source) or block by block.
  std::vector<slot_pair> moves = r.moves;
  std::stable_sort(moves.begin(), moves.end(),
                   [](const slot_pair& a, const slot_pair& b) { return a.from_slot < b.from_slot; });
  const uint64_t slice = r.from.layout.layer_bytes;
  std::vector<byte_run> runs;
  runs.reserve(moves.size() * (layer_end(r) - r.first_layer));
  auto add = [&](const slot_pair& m, uint32_t layer) {
    const uint64_t from = r.from.layout.offset(m.from_slot, layer), to = r.to.layout.offset(m.to_slot, layer);
    if (!runs.empty() && runs.back().from_offset + runs.back().bytes == from &&
        runs.back().to_offset + runs.back().bytes == to)
      runs.back().bytes += slice;
    else
      runs.push_back({from, to, slice});
  };
  if (r.from.layout.order == slot_order::layer_major) {
    for (uint32_t l = r.first_layer; l < layer_end(r); ++l)
      for (const auto& m : moves)
        add(m, l);
  } else {
    for (const auto& m : moves)
      for (uint32_t l = r.first_layer; l < layer_end(r); ++l)
        add(m, l);
  }
  return runs;
}

std::vector<byte_run> split_runs(const std::vector<byte_run>& runs, uint64_t max_bytes) {
  std::vector<byte_run> pieces;
  uint64_t count = 0;
  for (const auto& run : runs)
    count += (run.bytes + max_bytes - 1) / max_bytes;
  pieces.reserve(count);
  for (const auto& run : runs)
    for (uint64_t done = 0; done < run.bytes; done += max_bytes)
      pieces.push_back({run.from_offset + done, run.to_offset + done, std::min(max_bytes, run.bytes - done)});
  return pieces;
}

} // namespace kvtier::copy
