// The gather/scatter kernel that converts between block-major and
// layer-major slices as it copies, and a compute load for measurements.

#include "kernels/copy/cuda/copy_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#ifdef KVTIER_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#include <cstdio>
#include <cstdlib>

namespace kvtier::copy::cuda {
namespace {

// Eight 16-byte loads in flight per thread before the first store: over
// PCIe (mapped host memory) a load takes ~1-2 us, and 16 CTAs x 256 threads
// x 8 x 16 B = 512 KiB in flight cover 50 GB/s x 2 us with room to spare.
constexpr int unroll = 8;
static_assert(sizeof(slice_pair) == sizeof(uint2), "descriptors are read as one 8-byte load");
constexpr unsigned threads_per_cta = 256;

__global__ void copy_slices_kernel(const slice_pair* __restrict__ pairs, uint32_t layer_count, uint32_t first_layer,
                                   uint32_t units_per_slice, uint32_t total_units, const uint4* __restrict__ src,
                                   slice_layout sl, uint4* __restrict__ dst, slice_layout dl) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < total_units; base += unroll * stride) {
    uint4 v[unroll];
    uint64_t to[unroll];
    // No branch around the loads: out-of-range lanes re-read the last unit
    // and skip the store. With a branch the compiler issues the descriptor
    // load, then the data load, one unit after another (16 latencies per
    // iteration instead of 2; measured 107 GB/s HBM->HBM on 16 CTAs).
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      uint32_t want = base + k * stride;
      uint32_t u = want < total_units ? want : total_units - 1;
      uint32_t slice = u / units_per_slice;
      uint32_t off = u - slice * units_per_slice;
      uint32_t p = slice / layer_count;
      uint32_t layer = first_layer + (slice - p * layer_count);
      const uint2 sp = reinterpret_cast<const uint2*>(pairs)[p]; // {from_slot, to_slot} in one load
      uint64_t from = (sp.x * sl.slot_pitch + (layer - sl.layer_shift) * sl.layer_pitch) / 16 + off;
      uint64_t dest = (sp.y * dl.slot_pitch + (layer - dl.layer_shift) * dl.layer_pitch) / 16 + off;
      to[k] = want < total_units ? dest : ~uint64_t{0};
      v[k] = src[from];
    }
#pragma unroll
    for (int k = 0; k < unroll; ++k)
      if (to[k] != ~uint64_t{0})
        dst[to[k]] = v[k];
  }
}

} // namespace

cudaError_t launch_copy_slices(const copy_slices_args& a, unsigned ctas, cudaStream_t stream) {
  uint64_t units = a.layer_bytes / 16;
  uint64_t total = uint64_t{a.pair_count} * a.layer_count * units;
  if (total == 0)
    return cudaSuccess;
  if (total >= (uint64_t{1} << 31) || a.layer_bytes % 16 != 0)
    return cudaErrorInvalidValue;
  uint64_t needed = (total + threads_per_cta - 1) / threads_per_cta;
  unsigned grid = static_cast<unsigned>(needed < ctas ? needed : ctas);
  copy_slices_kernel<<<grid, threads_per_cta, 0, stream>>>(
      a.pairs, a.layer_count, a.first_layer, static_cast<uint32_t>(units), static_cast<uint32_t>(total),
      static_cast<const uint4*>(a.src), a.src_layout, static_cast<uint4*>(a.dst), a.dst_layout);
  return cudaGetLastError();
}

// -- bulk copies (TMA) -------------------------------------------------------

namespace {

constexpr uint32_t bulk_stage_bytes = 16 * 1024;
constexpr int bulk_stages = 4;

struct bulk_plan {
  uint32_t total_slices = 0;
  uint32_t slices_per_item = 1; // slices no larger than a stage: whole slices per item
  uint32_t segs_per_slice = 1;  // larger slices: one stage-sized segment per item
  uint32_t items = 0;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void bulk_load(uint32_t smem, const void* global, uint32_t bytes, uint32_t barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem),
               "l"(global), "r"(bytes), "r"(barrier)
               : "memory");
}

__device__ __forceinline__ void bulk_store(void* global, uint32_t smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(global), "r"(smem), "r"(bytes)
               : "memory");
}
#endif

__global__ void bulk_copy_slices_kernel(const slice_pair* __restrict__ pairs, uint32_t layer_count,
                                        uint32_t first_layer, uint32_t layer_bytes, bulk_plan plan, const uint8_t* src,
                                        slice_layout sl, uint8_t* dst, slice_layout dl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ __align__(8) uint64_t full[bulk_stages];
  if (threadIdx.x != 0)
    return;
  for (int s = 0; s < bulk_stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&full[s])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

  // Item -> its slices and the byte range of each it covers.
  auto item_span = [&](uint32_t item, uint32_t& first, uint32_t& count, uint32_t& offset, uint32_t& bytes) {
    if (plan.segs_per_slice == 1) {
      first = item * plan.slices_per_item;
      count = min(plan.slices_per_item, plan.total_slices - first);
      offset = 0;
      bytes = layer_bytes;
    } else {
      first = item / plan.segs_per_slice;
      count = 1;
      offset = (item % plan.segs_per_slice) * bulk_stage_bytes;
      bytes = min(bulk_stage_bytes, layer_bytes - offset);
    }
  };
  auto slice_at = [&](const uint8_t* base, const slice_layout& l, uint32_t t, bool from) {
    uint32_t p = t / layer_count;
    uint32_t layer = first_layer + (t - p * layer_count);
    uint32_t slot = from ? pairs[p].from_slot : pairs[p].to_slot;
    return base + slot * l.slot_pitch + (layer - l.layer_shift) * l.layer_pitch;
  };
  // Adjacent slices that are adjacent in memory too go as one bulk copy.
  auto load = [&](uint32_t item, int s) {
    uint32_t first, count, offset, bytes;
    item_span(item, first, count, offset, bytes);
    uint32_t barrier = smem_address(&full[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(count * bytes)
                 : "memory");
    uint32_t smem = smem_address(stage + s * bulk_stage_bytes);
    const uint8_t* run = nullptr;
    uint32_t run_bytes = 0, run_smem = smem;
    for (uint32_t j = 0; j < count; ++j) {
      const uint8_t* from = slice_at(src, sl, first + j, true) + offset;
      if (run != nullptr && from == run + run_bytes) {
        run_bytes += bytes;
        continue;
      }
      if (run != nullptr)
        bulk_load(run_smem, run, run_bytes, barrier);
      run = from, run_bytes = bytes, run_smem = smem + j * bytes;
    }
    bulk_load(run_smem, run, run_bytes, barrier);
  };
  auto store = [&](uint32_t item, int s) {
    uint32_t first, count, offset, bytes;
    item_span(item, first, count, offset, bytes);
    uint32_t smem = smem_address(stage + s * bulk_stage_bytes);
    uint8_t* run = nullptr;
    uint32_t run_bytes = 0, run_smem = smem;
    for (uint32_t j = 0; j < count; ++j) {
      uint8_t* to = const_cast<uint8_t*>(slice_at(dst, dl, first + j, false)) + offset;
      if (run != nullptr && to == run + run_bytes) {
        run_bytes += bytes;
        continue;
      }
      if (run != nullptr)
        bulk_store(run, run_smem, run_bytes);
      run = to, run_bytes = bytes, run_smem = smem + j * bytes;
    }
    bulk_store(run, run_smem, run_bytes);
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  };

  const uint32_t step = gridDim.x;
  for (int s = 0; s < bulk_stages; ++s)
    if (blockIdx.x + s * step < plan.items)
      load(blockIdx.x + s * step, s);
  uint32_t parity = 0;
  int s = 0;
  for (uint32_t item = blockIdx.x; item < plan.items; item += step) {
    uint32_t barrier = smem_address(&full[s]);
    asm volatile("{\n"
                 ".reg .pred ready;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
                 "@!ready bra wait_%=;\n"
                 "}\n" ::"r"(barrier),
                 "r"((parity >> s) & 1u)
                 : "memory");
    parity ^= 1u << s;
    store(item, s);
    uint32_t next = item + bulk_stages * step;
    if (next < plan.items) {
      // The stage is refilled only once its stores have read it.
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      load(next, s);
    }
    s = (s + 1) % bulk_stages;
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

} // namespace

cudaError_t launch_bulk_copy_slices(const copy_slices_args& a, unsigned ctas, cudaStream_t stream) {
  int device = 0, major = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); e != cudaSuccess)
    return e;
  if (major < 9)
    return cudaErrorNotSupported;
  uint64_t total = uint64_t{a.pair_count} * a.layer_count;
  if (total == 0)
    return cudaSuccess;
  if (a.layer_bytes % 16 != 0 || a.layer_bytes >= (uint64_t{1} << 31) || total >= (uint64_t{1} << 31))
    return cudaErrorInvalidValue;
  bulk_plan plan;
  plan.total_slices = static_cast<uint32_t>(total);
  if (a.layer_bytes <= bulk_stage_bytes) {
    plan.slices_per_item = static_cast<uint32_t>(bulk_stage_bytes / a.layer_bytes);
    plan.items = static_cast<uint32_t>((total + plan.slices_per_item - 1) / plan.slices_per_item);
  } else {
    plan.segs_per_slice = static_cast<uint32_t>((a.layer_bytes + bulk_stage_bytes - 1) / bulk_stage_bytes);
    if (total * plan.segs_per_slice >= (uint64_t{1} << 31))
      return cudaErrorInvalidValue;
    plan.items = static_cast<uint32_t>(total * plan.segs_per_slice);
  }
  constexpr int smem = bulk_stages * bulk_stage_bytes;
  // Per device and cheap next to the copy; both lanes' threads launch this.
  if (cudaError_t e = cudaFuncSetAttribute(bulk_copy_slices_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  unsigned grid = plan.items < ctas ? plan.items : ctas;
  bulk_copy_slices_kernel<<<grid, 32, smem, stream>>>(
      a.pairs, a.layer_count, a.first_layer, static_cast<uint32_t>(a.layer_bytes), plan,
      static_cast<const uint8_t*>(a.src), a.src_layout, static_cast<uint8_t*>(a.dst), a.dst_layout);
  return cudaGetLastError();
}

// -- compute load ----------------------------------------------------------

namespace {

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2bfloat16((static_cast<float>(x & 0xffff) / 65536.0f) - 0.5f);
  }
}

#ifndef KVTIER_HAVE_CUBLAS
// Fallback when cuBLAS is absent: dependent FMAs on every SM, no memory traffic.
__global__ void fma_load(float* out, int rounds) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
  for (int i = 0; i < rounds; ++i) {
    a = fmaf(a, b, c);
    d = fmaf(d, c, b);
    b = fmaf(b, a, d) * 1e-3f + 1.0f;
  }
  if (a + b + c + d == 1.2345f)
    out[0] = a;
}
#endif

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kvtier: CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::abort();
  }
}

} // namespace

struct compute_load::impl {
  int n = 0;
  cudaStream_t stream = nullptr;
  __nv_bfloat16* a = nullptr;
  __nv_bfloat16* b = nullptr;
  __nv_bfloat16* c = nullptr;
  float* sink = nullptr;
#ifdef KVTIER_HAVE_CUBLAS
  cublasHandle_t handle = nullptr;
#endif
};

compute_load::compute_load(int n) : impl_(new impl) {
  impl_->n = n;
  must(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "compute stream");
  size_t elems = size_t(n) * n;
  must(cudaMalloc(&impl_->a, elems * 2), "gemm a");
  must(cudaMalloc(&impl_->b, elems * 2), "gemm b");
  must(cudaMalloc(&impl_->c, elems * 2), "gemm c");
  must(cudaMalloc(&impl_->sink, 16), "sink");
  fill_bf16<<<1024, 256, 0, impl_->stream>>>(impl_->a, elems, 1);
  fill_bf16<<<1024, 256, 0, impl_->stream>>>(impl_->b, elems, 2);
  must(cudaGetLastError(), "fill");
#ifdef KVTIER_HAVE_CUBLAS
  if (cublasCreate(&impl_->handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "kvtier: cublasCreate failed\n");
    std::abort();
  }
  cublasSetStream(impl_->handle, impl_->stream);
#endif
  must(cudaStreamSynchronize(impl_->stream), "compute init");
}

compute_load::~compute_load() {
#ifdef KVTIER_HAVE_CUBLAS
  cublasDestroy(impl_->handle);
#endif
  cudaFree(impl_->a);
  cudaFree(impl_->b);
  cudaFree(impl_->c);
  cudaFree(impl_->sink);
  cudaStreamDestroy(impl_->stream);
  delete impl_;
}

const char* compute_load::what() const {
#ifdef KVTIER_HAVE_CUBLAS
  return "bf16 GEMM (cuBLAS)";
#else
  return "FMA kernel (no cuBLAS)";
#endif
}

double compute_load::flops_per_iteration() const {
  double n = impl_->n;
  return 2 * n * n * n;
}

float compute_load::run_ms(int iterations) {
  cudaEvent_t start, stop;
  must(cudaEventCreate(&start), "event");
  must(cudaEventCreate(&stop), "event");
  must(cudaEventRecord(start, impl_->stream), "record");
  for (int i = 0; i < iterations; ++i) {
#ifdef KVTIER_HAVE_CUBLAS
    float alpha = 1, beta = 0;
    auto st = cublasGemmEx(impl_->handle, CUBLAS_OP_N, CUBLAS_OP_N, impl_->n, impl_->n, impl_->n, &alpha, impl_->a,
                           CUDA_R_16BF, impl_->n, impl_->b, CUDA_R_16BF, impl_->n, &beta, impl_->c, CUDA_R_16BF,
                           impl_->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "kvtier: cublasGemmEx failed (%d)\n", static_cast<int>(st));
      std::abort();
    }
#else
    fma_load<<<132 * 8, 256, 0, impl_->stream>>>(impl_->sink, 20000);
#endif
  }
  must(cudaEventRecord(stop, impl_->stream), "record");
  must(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  must(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

} // namespace kvtier::copy::cuda
