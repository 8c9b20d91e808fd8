#pragma once
// The last step of both paged decode kernels: each (sequence, query head) has
// one record per partition — its score maximum m, its sum of exp(score - m)
// l, and its unnormalized output o[head_dim] — laid out
//   partial_ml[2 * r], partial_ml[2 * r + 1], partial_out[r * 128 .. +128]
// with r = (sequence * q_heads + head) * partitions + partition. A partition
// past a sequence's context has l = 0 and is skipped. Writes bf16
// sum(o_p * exp(m_p - M)) / sum(l_p * exp(m_p - M)) to args.out.

#include "kernels/model/cuda/paged_decode.hpp"

namespace kvtier::model::cuda {

/// Enqueues the merge on `stream` (a cudaStream_t); returns the CUDA error code.
int merge_partitions(const paged_decode_args& args, int partitions, const float* partial_ml, const float* partial_out,
                     void* stream);

} // namespace kvtier::model::cuda
