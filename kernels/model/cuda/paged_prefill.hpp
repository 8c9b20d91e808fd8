#pragma once
// Chunked-prefill attention on tensor cores over kvtier's HBM pool (the
// layout of kernels/model/paged_kv.hpp: layer-major slots, each slot's layer
// slice holding K then V as [kv_head][token in block][head_dim] bf16).
//
// The step's query rows are grouped into tiles: a tile is up to
// paged_prefill_tile_tokens(...) consecutive rows of ONE sequence (a prefill
// chunk's tokens, or a lone decode row); the same tile_tokens goes in the args. Each thread block owns one
// (tile, KV head): its rows times the KV head's query group form the matrix
// product's M dimension, so every K and V row is read once for the whole
// group. The block streams the sequence's K/V from position 0 up to the
// tile's last position through shared memory (cp.async, two tiles in flight)
// and keeps an online softmax in registers: the cached prefix is attended in
// full and the chunk's own tokens causally (a row at position p sees
// positions <= p). Both products are bf16 with float accumulation (mma.sync,
// or warpgroup MMA on compute capability 9.x: paged_prefill_wgmma.hpp);
// probabilities are rounded to bf16 before the V product.
//
// Split over the context: a step of few tiles over a long prefix (a 512-token
// chunk after 32k cached tokens is 128 blocks on a 132-SM GPU) would leave
// most of the GPU's warps idle. With splits > 1 each (tile, KV head) is
// `splits` blocks (grid z), each sweeping an equal share of the tile's KV
// tiles; each writes its rows' partial record (score maximum, sum, unnormalized
// output) to `workspace` in the layout of paged_decode_merge.hpp, with the
// rows [first_row, first_row + rows) the tiles cover as its sequences, and
// the decode kernels' merge combines them. A share wholly in a row's future
// (or past the tile's context) is an empty record (sum 0) the merge skips.
//
// paged_prefill_check_args checks, with an error string: head_dim == 128;
// q_heads % kv_heads == 0 and the group is 1, 2, 4 or 8; tiles, block_tokens
// >= 1; tile_tokens one that paged_prefill_tile_tokens gives; every pointer
// set; splits >= 1, and with splits > 1 a workspace and rows >= 1. The caller
// keeps what lives on the device and is not checked: a tile's rows are one
// sequence's consecutive positions, the K/V of every position up to its last
// row's are in the pool (the chunk's own written first), and the block table
// covers them.
// The header includes no CUDA: every pointer is a device pointer.

#include <cstdint>
#include <string>

namespace kvtier::model::cuda {

/// Which tensor-core instruction runs the attention: `automatic` takes
/// Hopper's warpgroup MMA where the build has it (CUDA architectures with 90)
/// and the device is compute capability 9.x, else mma.sync; `mma_sync`
/// forces the portable kernel; `wgmma` asks for the Hopper one and is an
/// error (cudaErrorNotSupported) where it is missing.
enum class paged_prefill_instruction : int32_t { automatic, mma_sync, wgmma };

struct paged_prefill_args {
  const float* q = nullptr;   // float [rows][q_heads][head_dim], RoPE applied
  void* out = nullptr;        // bf16 [rows][q_heads][head_dim]
  const void* pool = nullptr; // the HBM pool's first byte
  uint64_t layer_offset = 0;  // tier_layout::offset(0, layer)
  uint64_t slot_stride = 0;   // bytes between slot s and s+1 in one layer (layer_bytes)
  // Streamed blocks (tensor-core kernels): table entries >= staged_from name
  // slice staged[entry - staged_from] of this layer's staging area, slices
  // slot_stride apart, instead of a pool slot.
  const void* staged = nullptr;
  uint32_t staged_from = 0xffff'ffffu;
  const uint32_t* tables = nullptr;      // every sequence's block table, concatenated
  const uint32_t* table_begin = nullptr; // per row: where its sequence's table starts in `tables`
  const int64_t* positions = nullptr;    // per row: its position
  const uint32_t* tile_rows = nullptr;   // per tile: {first row, row count}
  int32_t tiles = 0;
  int32_t tile_tokens = 0; // what paged_prefill_tile_tokens returned for this step
  int32_t q_heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 128;
  int32_t block_tokens = 16;
  float scale = 0; // usually 1 / sqrt(head_dim)
  // Split over the context (paged_prefill_splits): 1 writes `out` directly.
  int32_t splits = 1;
  float* workspace = nullptr; // paged_prefill_workspace_floats(rows, q_heads, splits) floats
  uint32_t first_row = 0;     // the tiles cover rows [first_row, first_row + rows) of q and out
  uint32_t rows = 0;
  paged_prefill_instruction instruction = paged_prefill_instruction::automatic;
};

/// Most rows (query tokens) in one tile for a query group of `group` heads, in
/// a step of `rows` query rows whose longest sequence reaches
/// `longest_context` positions: wide tiles where they still give every
/// multiprocessor four blocks, or where each block's share of the context
/// (after the split that fills the GPU) is at least 8k positions; narrow
/// ones otherwise.
int paged_prefill_tile_tokens(int group, int64_t rows, int kv_heads, int64_t longest_context, int multiprocessors);

/// How many blocks share each (tile, KV head)'s context, for tiles of
/// `tile_tokens` (what paged_prefill_tile_tokens gave): 1 when the tiles
/// alone fill the instance's blocks per multiprocessor (two narrow, one
/// wide); else the fewest that fill them in waves at least 85% full, each
/// block sweeping at least 8 KV tiles of `longest_context` positions.
int paged_prefill_splits(int tiles, int kv_heads, int tile_tokens, int group, int64_t longest_context,
                         int multiprocessors);

/// Floats of workspace a split launch needs (0 when splits is 1).
uint64_t paged_prefill_workspace_floats(uint32_t rows, int q_heads, int splits);

/// Empty when args are valid, else what is wrong.
std::string paged_prefill_check_args(const paged_prefill_args& args);

/// Whether the warpgroup-MMA kernel is built in and the current device runs it.
bool paged_prefill_has_wgmma();

/// Enqueues the attention on `stream` (a cudaStream_t). Returns the CUDA
/// error code (0 = ok).
int paged_prefill_attention_tc(const paged_prefill_args& args, void* stream);

} // namespace kvtier::model::cuda
