#pragma once
// The Hopper instance of the chunked-prefill attention
// (paged_prefill_wgmma.cu): warpgroup MMA (wgmma) with 128-byte swizzled
// shared-memory operands. It exists only where the build's CUDA
// architectures include 90 (compiled for sm_90a; CMake then defines
// KVTIER_PREFILL_WGMMA=1 for kvtier_model_cuda) and runs only on compute
// capability 9.x devices; paged_prefill_attention_tc chooses it.
// Same args, tile rule, split and workspace layout as the mma.sync kernel.

#include "kernels/model/cuda/paged_prefill.hpp"

namespace kvtier::model::cuda {

/// Enqueues the wgmma kernel alone (no merge of split records) for tiles of
/// 128 or 256 rows (tile_tokens x group). REQUIRES: paged_prefill_check_args(a)
/// is empty and the current device is compute capability 9.x. Returns the
/// CUDA error code (0 = ok).
int paged_prefill_wgmma_launch(const paged_prefill_args& a, void* stream);

} // namespace kvtier::model::cuda
