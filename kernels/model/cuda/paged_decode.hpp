#pragma once
// Paged decode attention on the GPU over kvtier's HBM pool (the layout of
// kernels/model/paged_kv.hpp: layer-major slots, each slot's layer slice
// holding K then V as [kv_head][token in block][head_dim] bf16).
//
// One query token per sequence. The context is split into partitions so that
// a long sequence at batch 1 still fills the GPU; each thread block owns one
// (sequence, KV head, partition) and computes every query head of that KV
// head's group, so each K and V row is read from HBM exactly once. A second
// kernel merges the partitions with the log-sum-exp rule.
//
// paged_decode_check_args checks, with an error string: head_dim == 128;
// q_heads % kv_heads == 0 and the group is 1, 2, 4 or 8; batch, max_context and
// block_tokens >= 1; the pointers one kernel needs are set. The caller also
// keeps what lives on the device and is not checked: every context length is
// >= 1 and <= max_context, and its block table covers it.
// The header includes no CUDA: every pointer is a device pointer, bf16 data
// passed as void*.

#include <cstdint>
#include <string>

namespace kvtier::model::cuda {

struct paged_decode_args {
  const void* q = nullptr;    // bf16 [batch][q_heads][head_dim], RoPE applied
  void* out = nullptr;        // bf16 [batch][q_heads][head_dim]
  const void* pool = nullptr; // the HBM pool's first byte
  uint64_t layer_offset = 0;  // tier_layout::offset(0, layer)
  uint64_t slot_stride = 0;   // bytes between slot s and s+1 in one layer (layer_bytes)
  // Streamed blocks (tensor-core kernels): table entries >= staged_from name
  // slice staged[entry - staged_from] of this layer's staging area, slices
  // slot_stride apart, instead of a pool slot.
  const void* staged = nullptr;
  uint32_t staged_from = 0xffff'ffffu;
  const int32_t* block_tables = nullptr; // [batch][max_blocks] slots
  int32_t max_blocks = 0;
  const int32_t* context_lens = nullptr; // [batch] tokens attended (position + 1)
  // Alternatives the model's forward passes instead (tensor-core kernel only):
  const uint32_t* table_begin = nullptr; // when set: sequence b's table starts at block_tables[table_begin[b]]
  const int64_t* positions = nullptr;    // when set: sequence b attends [0, positions[b]]
  const float* q_f32 = nullptr;          // when set: float queries, same shape as q
  int32_t max_context = 0;               // >= every context_lens[b]; sizes the split
  int32_t batch = 0;
  int32_t q_heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 128;
  int32_t block_tokens = 16;
  float scale = 0; // usually 1 / sqrt(head_dim)
  // Float8 KV (tensor-core kernel only): K and V stored as e4m3, one byte an
  // element in the same [kv_head][token][head_dim] order (slot_stride is then
  // half the bf16 slice), read as k_scale * K and v_scale * V.
  bool kv_fp8 = false;
  float k_scale = 1;
  float v_scale = 1;
};

/// Scratch the kernels need for `args` (partial maxima, sums and outputs).
uint64_t paged_decode_workspace_bytes(const paged_decode_args& args, int multiprocessors);

/// Empty when args are valid, else what is wrong.
std::string paged_decode_check_args(const paged_decode_args& args);

/// Enqueues the attention on `stream` (a cudaStream_t). `workspace` holds at
/// least paged_decode_workspace_bytes. Returns the CUDA error code (0 = ok).
int paged_decode_attention(const paged_decode_args& args, void* workspace, int multiprocessors, void* stream);

/// The same attention with both matrix products on tensor cores (bf16 in,
/// float accumulate; probabilities rounded to bf16 before the V product).
/// Query group up to 8.
uint64_t paged_decode_tc_workspace_bytes(const paged_decode_args& args, int multiprocessors);
int paged_decode_attention_tc(const paged_decode_args& args, void* workspace, int multiprocessors, void* stream);

} // namespace kvtier::model::cuda
