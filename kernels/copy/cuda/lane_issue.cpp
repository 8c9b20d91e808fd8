// How a lane puts one chunk on the link: per-run or batched DMA through HBM
// staging plus the layout-converting kernel, host-packed staging, strided
// DMA straight into the layer-major pool, the copy kernel over mapped pinned
// memory, and split (batched DMA and the kernel on one chunk at once).
// Errors land in the job (its first one wins); the chunk's half is marked
// free on the stream that finishes it.

#include "kernels/copy/cuda/lane.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cuda/gpu_mover.hpp"
#include "kernels/quant/offload_cuda.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvtier::copy::gpu {

template <class Issue>
bool lane::spread(job& j, size_t count, Issue&& issue) {
  unsigned k = static_cast<unsigned>(std::min<size_t>(m_.dma_streams(), std::max<size_t>(count, 1)));
  if (k <= 1)
    return issue(copy_stream_, size_t{0}, count);
  cudaError_t e;
  if ((e = cudaEventRecord(fork_, copy_stream_)))
    return fail(j, "event record", e), false;
  for (unsigned s = 0; s < k; ++s) {
    cudaStream_t stream = s == 0 ? copy_stream_ : extra_[s - 1];
    if (s > 0 && (e = cudaStreamWaitEvent(stream, fork_)))
      return fail(j, "stream wait", e), false;
    if (!issue(stream, count * s / k, count * (s + 1) / k))
      return false;
  }
  for (unsigned s = 1; s < k; ++s)
    if ((e = cudaEventRecord(join_[s - 1], extra_[s - 1])) || (e = cudaStreamWaitEvent(copy_stream_, join_[s - 1])))
      return fail(j, "stream join", e), false;
  return true;
}

void lane::issue_chunk(job& j, std::span<const slot_pair> moves, int h, double dma_share) {
  // The GPU finished with this half two chunks ago (host waits: it rewrites
  // the half's descriptors and pinned staging next).
  if (cudaError_t e = cudaEventSynchronize(half_[h].free); e != cudaSuccess)
    return fail(j, "staging wait", e);
  switch (j.path) {
    case copy_path::dma_2d:
      return issue_strided(j, moves, h);
    case copy_path::sm_copy: {
      issue_mapped(j, moves, h, 0, copy_stream_);
      if (cudaError_t e = cudaEventRecord(half_[h].free, copy_stream_))
        fail(j, "event record", e);
      return;
    }
    case copy_path::split: {
      // The DMA share first in the chunk (adjacent DRAM slots there still
      // merge into runs), the kernel's share after it, both in flight at once.
      const auto& shape = m_.options().shape;
      uint64_t staged_bytes = uint64_t{layers_of(j.request, shape).count} * shape.layer_bytes;
      auto by_dma = static_cast<size_t>(std::lround(static_cast<double>(moves.size()) * dma_share));
      by_dma = std::min<size_t>({by_dma, moves.size(), blocks_per_chunk(m_.stage_bytes(), staged_bytes)});
      cudaEvent_t also = nullptr;
      if (by_dma < moves.size()) {
        issue_mapped(j, moves.subspan(by_dma), h, static_cast<uint32_t>(by_dma), mapped_stream_);
        if (cudaError_t e = cudaEventRecord(half_[h].mapped, mapped_stream_))
          return fail(j, "event record", e);
        also = half_[h].mapped;
      }
      return issue_staged(j, moves.first(by_dma), h, copy_path::dma_batch, also);
    }
    default:
      return issue_staged(j, moves, h, j.path, nullptr);
  }
}

void lane::issue_strided(job& j, std::span<const slot_pair> moves, int h) {
  // Block-major DRAM block <-> its layer slices in the layer-major pool, one strided copy each.
  const auto& shape = m_.options().shape;
  auto range = layers_of(j.request, shape);
  const uint64_t lb = shape.layer_bytes;
  const uint64_t dram_first = uint64_t{range.first} * lb;
  const uint64_t hbm_pitch = uint64_t{shape.hbm_slots} * lb;
  const auto n = static_cast<uint32_t>(moves.size());
  cudaError_t e;
  bool issued = spread(j, n, [&](cudaStream_t stream, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      uint32_t hslot = to_hbm_ ? moves[i].to_slot : moves[i].from_slot;
      uint32_t dslot = to_hbm_ ? moves[i].from_slot : moves[i].to_slot;
      std::byte* hbm = m_.hbm() + uint64_t{range.first} * hbm_pitch + uint64_t{hslot} * lb;
      std::byte* dram = m_.dram() + uint64_t{dslot} * shape.block_bytes() + dram_first;
      e = to_hbm_ ? cudaMemcpy2DAsync(hbm, hbm_pitch, dram, lb, lb, range.count, cudaMemcpyHostToDevice, stream)
                  : cudaMemcpy2DAsync(dram, lb, hbm, hbm_pitch, lb, range.count, cudaMemcpyDeviceToHost, stream);
      if (e)
        return fail(j, "cudaMemcpy2DAsync", e), false;
    }
    return true;
  });
  if (!issued)
    return;
  j.operations += n;
  if ((e = cudaEventRecord(half_[h].free, copy_stream_)))
    fail(j, "event record", e);
}

void lane::issue_mapped(job& j, std::span<const slot_pair> moves, int h, uint32_t first_desc, cudaStream_t stream) {
  const auto& shape = m_.options().shape;
  auto range = layers_of(j.request, shape);
  auto& hb = half_[h];
  const auto n = static_cast<uint32_t>(moves.size());
  for (uint32_t i = 0; i < n; ++i)
    hb.host_desc[first_desc + i] = {moves[i].from_slot, moves[i].to_slot};
  cudaError_t e;
  if ((e = cudaMemcpyAsync(hb.dev_desc + first_desc, hb.host_desc + first_desc, size_t{n} * sizeof(slice_pair),
                           cudaMemcpyHostToDevice, stream)))
    return fail(j, "descriptor upload", e);
  cuda::copy_slices_args k;
  k.pair_count = n;
  k.first_layer = range.first;
  k.layer_count = range.count;
  k.layer_bytes = shape.layer_bytes;
  k.pairs = hb.dev_desc + first_desc;
  if (to_hbm_) {
    k.src = m_.dram_device(), k.src_layout = m_.dram_slices();
    k.dst = m_.hbm(), k.dst_layout = m_.hbm_slices();
  } else {
    k.src = m_.hbm(), k.src_layout = m_.hbm_slices();
    k.dst = m_.dram_device(), k.dst_layout = m_.dram_slices();
  }
  e = m_.options().bulk_copy ? cuda::launch_bulk_copy_slices(k, m_.sm_ctas(), stream)
                             : cuda::launch_copy_slices(k, m_.sm_ctas(), stream);
  if (e)
    return fail(j, "copy kernel over mapped memory", e);
  j.operations += 2;
}

void lane::issue_staged(job& j, std::span<const slot_pair> moves, int h, copy_path how, cudaEvent_t also) {
  const auto& shape = m_.options().shape;
  const auto& r = j.request;
  auto range = layers_of(r, shape);
  const uint64_t lb = shape.layer_bytes;
  const uint64_t dlb = shape.dram_layer_bytes(); // a slice in DRAM and in staging (packed with a codec)
  const uint64_t sel = uint64_t{range.count} * dlb;
  const bool whole = range.count == shape.layers;
  auto& hb = half_[h];
  const uint32_t n = static_cast<uint32_t>(moves.size());
  const size_t desc_bytes = size_t{n} * sizeof(slice_pair);
  cudaError_t e;
  // The stream that finishes the chunk: it marks the half free.
  cudaStream_t last = to_hbm_ ? convert_stream_ : copy_stream_;
  auto mark_free = [&] {
    if (also != nullptr && (e = cudaStreamWaitEvent(last, also)))
      return fail(j, "stream wait", e);
    if ((e = cudaEventRecord(hb.free, last)))
      fail(j, "event record", e);
  };
  if (n == 0)
    return mark_free();

  cuda::copy_slices_args k;
  k.pair_count = n;
  k.first_layer = range.first;
  k.layer_count = range.count;
  k.layer_bytes = lb;
  k.pairs = hb.dev_desc;
  const slice_layout stage{sel, lb, range.first};
  const uint64_t dram_first = uint64_t{range.first} * dlb; // offset of the range in a DRAM block

  // Descriptors map staging position i <-> the HBM slot.
  for (uint32_t i = 0; i < n; ++i)
    hb.host_desc[i] = to_hbm_ ? slice_pair{i, moves[i].to_slot} : slice_pair{moves[i].from_slot, i};

  auto runs = how == copy_path::host_staged ? std::vector<dram_run>{} : dram_runs(moves, to_hbm_, whole);
  auto dram_at = [&](uint32_t i) {
    uint32_t slot = to_hbm_ ? moves[i].from_slot : moves[i].to_slot;
    return m_.dram() + uint64_t{slot} * shape.dram_block_bytes() + dram_first;
  };

  // Staging <-> the layer-major pool: the layout conversion, or the codec's
  // kernel (which converts the layout as it encodes or decodes).
  auto convert = [&](bool to_pool) -> cudaError_t {
    if (!shape.codec)
      return cuda::launch_copy_slices(k, m_.options().convert_ctas, convert_stream_);
    quant::gpu::offload_batch b;
    b.codec = *shape.codec;
    b.pairs = reinterpret_cast<const uint32_t*>(hb.dev_desc);
    b.hbm_is_from = !to_pool;
    b.pair_count = n;
    b.first_layer = range.first;
    b.layer_count = range.count;
    b.hbm = m_.hbm();
    b.hbm_slots = shape.hbm_slots;
    b.stage = hb.dev_stage;
    return static_cast<cudaError_t>(to_pool ? quant::gpu::decode_offload(b, convert_stream_)
                                            : quant::gpu::encode_offload(b, convert_stream_));
  };

  // Moves the chunk's bytes between DRAM and dev_stage on copy_stream_.
  auto link = [&]() -> bool {
    if (how == copy_path::host_staged) {
      auto kind = to_hbm_ ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      void* dst = to_hbm_ ? static_cast<void*>(hb.dev_stage) : hb.host_stage;
      const void* src = to_hbm_ ? static_cast<const void*>(hb.host_stage) : hb.dev_stage;
      if ((e = cudaMemcpyAsync(dst, src, n * sel, kind, copy_stream_)))
        return fail(j, "staged DMA", e), false;
      j.operations += 1;
      return true;
    }
    if (how == copy_path::dma_batch) {
      std::vector<void*> dsts(runs.size());
      std::vector<const void*> srcs(runs.size());
      std::vector<size_t> sizes(runs.size());
      for (size_t i = 0; i < runs.size(); ++i) {
        std::byte* host = dram_at(runs[i].first);
        std::byte* dev = hb.dev_stage + uint64_t{runs[i].first} * sel;
        dsts[i] = to_hbm_ ? static_cast<void*>(dev) : host;
        srcs[i] = to_hbm_ ? static_cast<const void*>(host) : dev;
        sizes[i] = runs[i].count * sel;
      }
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.srcLocHint.type = to_hbm_ ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
      attr.srcLocHint.id = to_hbm_ ? 0 : m_.options().device;
      attr.dstLocHint.type = to_hbm_ ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
      attr.dstLocHint.id = to_hbm_ ? m_.options().device : 0;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attr_index = 0;
      return spread(j, runs.size(), [&](cudaStream_t stream, size_t begin, size_t end) {
        if ((e = cudaMemcpyBatchAsync(dsts.data() + begin, srcs.data() + begin, sizes.data() + begin, end - begin,
                                      &attr, &attr_index, 1, stream)))
          return fail(j, "cudaMemcpyBatchAsync", e), false;
        j.operations += 1;
        return true;
      });
    }
    j.operations += runs.size();
    return spread(j, runs.size(), [&](cudaStream_t stream, size_t begin, size_t end) { // dma_runs
      for (size_t ri = begin; ri < end; ++ri) {
        std::byte* host = dram_at(runs[ri].first);
        std::byte* dev = hb.dev_stage + uint64_t{runs[ri].first} * sel;
        e = to_hbm_ ? cudaMemcpyAsync(dev, host, runs[ri].count * sel, cudaMemcpyHostToDevice, stream)
                    : cudaMemcpyAsync(host, dev, runs[ri].count * sel, cudaMemcpyDeviceToHost, stream);
        if (e)
          return fail(j, "cudaMemcpyAsync", e), false;
      }
      return true;
    });
  };

  if (to_hbm_) {
    if (how == copy_path::host_staged) // pack on the CPU while the previous chunk crosses the link
      pool_.parallel_for(
          n, [&](size_t i) { std::memcpy(hb.host_stage + i * sel, dram_at(static_cast<uint32_t>(i)), sel); });
    if (!link())
      return;
    if ((e = cudaMemcpyAsync(hb.dev_desc, hb.host_desc, desc_bytes, cudaMemcpyHostToDevice, copy_stream_)))
      return fail(j, "descriptor upload", e);
    if ((e = cudaEventRecord(hb.copied, copy_stream_)) || (e = cudaStreamWaitEvent(convert_stream_, hb.copied)))
      return fail(j, "event", e);
    k.src = hb.dev_stage, k.src_layout = stage;
    k.dst = m_.hbm(), k.dst_layout = m_.hbm_slices();
    if ((e = convert(true)))
      return fail(j, shape.codec ? "dequantize kernel" : "scatter kernel", e);
    j.operations += 1;
    mark_free();
  } else {
    if ((e = cudaMemcpyAsync(hb.dev_desc, hb.host_desc, desc_bytes, cudaMemcpyHostToDevice, convert_stream_)))
      return fail(j, "descriptor upload", e);
    k.src = m_.hbm(), k.src_layout = m_.hbm_slices();
    k.dst = hb.dev_stage, k.dst_layout = stage;
    if ((e = convert(false)))
      return fail(j, shape.codec ? "quantize kernel" : "gather kernel", e);
    j.operations += 1;
    if ((e = cudaEventRecord(hb.copied, convert_stream_)) || (e = cudaStreamWaitEvent(copy_stream_, hb.copied)))
      return fail(j, "event", e);
    if (!link())
      return;
    mark_free();
  }
}

} // namespace kvtier::copy::gpu
