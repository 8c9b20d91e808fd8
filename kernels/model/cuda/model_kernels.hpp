#pragma once
// The CUDA kernels of the model's GPU twin, as plain launch functions (C++17,
// raw device pointers: nvcc compiles the .cu, g++ the callers). bf16 values
// travel as uint16_t. Shapes and the pool layout are kernels/model's:
// activations row-major [rows][width], the pool layer-major with one slot's
// slice of a layer holding K then V, each [kv_head][token][head_dim].

#include <cuda_runtime.h>

#include <cstdint>

namespace kvtier::model::cuda {

/// The pool and one step's rows (one row per query position), all on the device.
struct paged_rows {
  const uint16_t* pool = nullptr;
  uint32_t slots = 0, kv_heads = 0, head_dim = 0, block_tokens = 0;
  // Positions count table entries: a table compression compacted skips the
  // dropped blocks, so a row's entry may be below its token's position.
  const int64_t* positions = nullptr;      // per row: its table entry; attends to entries [0, position]
  const int64_t* context = nullptr;        // per row: entries below are cached (K/V not written)
  const int64_t* rope_positions = nullptr; // per row: the token's position RoPE rotates by; null: `positions`
  const uint32_t* table_begin = nullptr;   // per row: where its sequence's block table starts in `tables`
  const uint32_t* tables = nullptr;
  uint32_t rows = 0;
};

void embed(const uint16_t* table, const uint32_t* tokens, uint32_t rows, uint32_t hidden, float* x, cudaStream_t s);

/// out = bf16(x / rms(x) * weight), one row per block.
void rms_norm(const float* x, const uint16_t* weight, uint32_t rows, uint32_t n, float eps, uint16_t* out,
              cudaStream_t s);

/// x += y, then out = bf16(x / rms(x) * weight): a residual add and the norm after it.
void add_rms_norm(float* x, const float* y, const uint16_t* weight, uint32_t rows, uint32_t n, float eps, uint16_t* out,
                  cudaStream_t s);

/// From the fused projection qkv [rows][(q_heads + 2 kv_heads) * D] (q, then k,
/// then v in each row): q [rows][q_heads*D] and k [rows][kv_heads*D] rotated by
/// RoPE (Hugging Face pairing j, j + D/2), v [rows][kv_heads*D] copied.
void split_qkv_rope(const float* qkv, float* q, float* k, float* v, const paged_rows& r, uint32_t q_heads,
                    const double* inv_freq, cudaStream_t s);

/// Writes bf16 K and V of rows whose position >= context into layer `layer` of the pool.
void store_kv(const float* k, const float* v, const paged_rows& r, uint32_t layer, uint16_t* pool, cudaStream_t s);

/// The same into a float8 pool (e4m3, K / k_scale and V / v_scale, saturated).
void store_kv_fp8(const float* k, const float* v, const paged_rows& r, uint32_t layer, uint8_t* pool, float k_scale,
                  float v_scale, cudaStream_t s);

/// Attention probability per table block (the CPU twin's block_mass), one
/// layer's worth added to `mass`: for each of `rows` rows (mass_rows: row
/// indices), the softmax of every query head over the row's positions
/// [0, position] of layer `layer`, summed per table block into `partial`
/// (rows x q_heads x stride floats, stride >= any row's table blocks); then
/// for each of `sequences` sequences (mass_sequences: {first row item, row
/// count, at, also, table blocks} each) the sums over its rows and heads are
/// added to mass[at + block] and its last row's alone to mass[also + block].
/// Sums run in a fixed order: the same bits every run. Table entries >=
/// staged_from name slice entry - staged_from of `staged` (the layer
/// stager's HBM copy of streamed blocks), slices as in the pool. bf16 pools only.
void block_mass(const float* q, const paged_rows& r, uint32_t layer, uint32_t q_heads, const void* staged,
                uint32_t staged_from, const uint32_t* mass_rows, uint32_t rows, const uint32_t* mass_sequences,
                uint32_t sequences, uint32_t stride, float* partial, float* mass, cudaStream_t s);

/// Paged attention of every row over layer `layer`: the context is split into
/// pieces of `split_tokens` positions (partials in `scratch`, combined after),
/// and each block reads a KV head's keys and values once for its whole query
/// group. Writes bf16 to out_bf16 and, when non-null, float to out_f32
/// ([rows][q_heads*D]). `scratch` holds scratch_floats(...) floats.
void paged_attention(const float* q, const paged_rows& r, uint32_t layer, uint32_t q_heads, uint32_t split_tokens,
                     uint32_t splits, float* scratch, uint16_t* out_bf16, float* out_f32, cudaStream_t s);
uint64_t attention_scratch_floats(uint32_t rows, uint32_t q_heads, uint32_t head_dim, uint32_t splits);
/// False when the kernel has no instance for this group size and head_dim.
bool attention_supported(uint32_t group, uint32_t head_dim);

void add_in_place(float* x, const float* y, uint64_t n, cudaStream_t s);

/// From the fused projection gate_up [rows][2 * width] (gate, then up, in each
/// row): out [rows][width] = bf16(silu(gate) * up).
void swiglu_rows(const float* gate_up, uint32_t rows, uint32_t width, uint16_t* out, cudaStream_t s);

/// Per row of `logits` ([rows][vocab]): the largest value's index (the lowest
/// among equals) and the value.
void argmax_rows(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* index, float* value, cudaStream_t s);

/// bf16(x), n elements.
void to_bf16(const float* x, uint64_t n, uint16_t* out, cudaStream_t s);

/// Fills n bf16 values with center +- spread from a hash of (seed, index).
void fill_random(uint16_t* out, uint64_t n, float center, float spread, uint64_t seed, cudaStream_t s);
/// The same as e4m3 bytes.
void fill_random_fp8(uint8_t* out, uint64_t n, float center, float spread, uint64_t seed, cudaStream_t s);

} // namespace kvtier::model::cuda
