#include "kernels/model/cuda/cuda_forward.hpp"

#include "kernels/model/cuda/layer_stager.hpp"
#include "kernels/model/cuda/model_kernels.hpp"
#include "kernels/model/cuda/paged_decode.hpp"
#include "kernels/model/cuda/paged_prefill.hpp"
#include "kernels/model/cuda/pinned_staging.hpp"
#include "kernels/model/rope.hpp"
#include "runtime/check.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

namespace kvtier::model {

namespace {

// wq, wk and wv are one allocation in that order ([Q + 2 KV][H]), as are
// w_gate and w_up ([2 F][H]): each is one GEMM a step (fewer launches, and a
// batch-1 step's matrix-vector products read one longer matrix).
struct device_layer {
  uint16_t *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
};

} // namespace

struct cuda_forward::impl {
  llama_config c;
  paged_kv_pool pool;
  cudaStream_t stream = nullptr;
  int multiprocessors = 0;
  cublasHandle_t blas = nullptr;
  std::vector<void*> owned; // every device allocation, freed at the end
  uint16_t *embed = nullptr, *final_norm = nullptr, *lm_head = nullptr;
  std::vector<device_layer> layers;
  double* inv_freq = nullptr;
  // Step buffers, grown to the largest step seen.
  uint32_t capacity_rows = 0, capacity_seqs = 0;
  uint64_t capacity_tables = 0, capacity_scratch = 0;
  // gate_up also holds the fused q/k/v projection before split_qkv_rope (the two are never live together).
  float *x = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *proj = nullptr, *gate_up = nullptr, *scratch = nullptr,
        *last = nullptr, *logits = nullptr, *best_logit = nullptr;
  uint32_t* best_token = nullptr;
  uint16_t *normed = nullptr, *attn = nullptr, *act = nullptr, *last_normed = nullptr;
  uint32_t *tokens = nullptr, *table_begin = nullptr, *tables = nullptr, *tile_rows = nullptr;
  int64_t *positions = nullptr, *context = nullptr, *rope_positions = nullptr;
  std::vector<uint32_t> last_rows; // of the last launch
  // Block mass of the last launch: per sequence that asked, where its
  // block_mass and last_block_mass start in `mass` (table size each; -1: not asked).
  std::vector<int64_t> mass_at;
  std::vector<uint32_t> mass_sizes;
  uint64_t mass_floats = 0, capacity_mass = 0, capacity_mass_index = 0, capacity_mass_partial = 0;
  float *mass = nullptr, *mass_partial = nullptr;
  uint32_t* mass_index = nullptr; // the rows, then the sequences' records (model_kernels.hpp's block_mass)
  cuda::layer_stager stager;      // streamed blocks' layers into HBM
  cuda::pinned_staging staging;   // the step's uploads and downloads (pinned: see pinned_staging.hpp)
  uint64_t last_staged_bytes = 0; // of the last launch, all layers
  std::string error;

  ~impl() {
    if (stream)
      cudaStreamSynchronize(stream);
    for (auto* p : owned)
      cudaFree(p);
    if (blas)
      cublasDestroy(blas);
    if (stream)
      cudaStreamDestroy(stream);
  }

  // Fills `host` from `device` through pinned memory (pageable where none
  // could be had), the stream synchronized.
  template <class T>
  void download_into(std::vector<T>& host, const T* device) {
    if (host.empty()) {
      cudaStreamSynchronize(stream);
      return;
    }
    if (const T* pinned = staging.download(device, host.size(), stream)) {
      cudaStreamSynchronize(stream);
      std::memcpy(host.data(), pinned, host.size() * sizeof(T));
      return;
    }
    cudaMemcpyAsync(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
  }

  template <class T>
  T* alloc(uint64_t count) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<uint64_t>(count, 1) * sizeof(T)) != cudaSuccess) {
      error = "cudaMalloc of " + std::to_string(count * sizeof(T)) + " bytes failed";
      return nullptr;
    }
    owned.push_back(p);
    return static_cast<T*>(p);
  }
  void release(void* p) {
    if (!p)
      return;
    std::erase(owned, p);
    cudaFree(p);
  }
  uint16_t* upload(const std::vector<bf16>& host) { return upload_concatenated({&host}); }
  /// The tensors one after another in one allocation.
  uint16_t* upload_concatenated(std::initializer_list<const std::vector<bf16>*> parts) {
    uint64_t n = 0;
    for (const auto* part : parts)
      n += part->size();
    auto* d = alloc<uint16_t>(n);
    uint64_t at = 0;
    for (const auto* part : parts) {
      if (d)
        cudaMemcpy(d + at, part->data(), part->size() * sizeof(uint16_t), cudaMemcpyHostToDevice);
      at += part->size();
    }
    return d;
  }
  uint16_t* random(uint64_t n, float center, float spread, uint64_t seed) {
    auto* d = alloc<uint16_t>(n);
    if (d)
      cuda::fill_random(d, n, center, spread, seed, stream);
    return d;
  }

  bool start(const llama_config& config, const paged_kv_pool& p) {
    c = config;
    pool = p;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      return error = "no CUDA device", false;
    if (!cuda::attention_supported(c.group(), c.head_dim))
      return error = "no paged attention kernel for group " + std::to_string(c.group()) + " and head_dim " +
                 std::to_string(c.head_dim),
             false;
    if (p.kv_fp8 && (c.head_dim != 128 || c.group() > 8))
      return error = "float8 KV needs the tensor-core decode kernel (head_dim 128, query group <= 8)", false;
    cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
      return error = "cudaStreamCreate failed", false;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS)
      return error = "cublasCreate failed", false;
    cublasSetStream(blas, stream);
    if (!stager.start(stream, error))
      return false;
    auto inv = rope_inv_freq(c);
    inv_freq = alloc<double>(inv.size());
    if (!inv_freq)
      return false;
    cudaMemcpy(inv_freq, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice);
    return true;
  }

  /// Y[rows][out] = X[rows][in] . W^T for W row-major [out][in].
  void gemm(const uint16_t* w, uint32_t out, uint32_t in, const uint16_t* x, float* y, uint32_t rows) {
    const float one = 1, zero = 0;
    cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows), static_cast<int>(in),
                 &one, w, CUDA_R_16BF, static_cast<int>(in), x, CUDA_R_16BF, static_cast<int>(in), &zero, y, CUDA_R_32F,
                 static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }

  bool reserve(uint32_t rows, uint32_t seqs, uint64_t table_entries, uint64_t scratch_floats) {
    const uint64_t H = c.hidden, Q = uint64_t{c.q_heads} * c.head_dim, KV = uint64_t{c.kv_heads} * c.head_dim,
                   F = c.intermediate;
    if (rows > capacity_rows) {
      for (void* p : {(void*)x, (void*)q, (void*)k, (void*)v, (void*)proj, (void*)gate_up, (void*)normed, (void*)attn,
                      (void*)act, (void*)tokens, (void*)positions, (void*)context, (void*)rope_positions,
                      (void*)table_begin, (void*)tile_rows})
        release(p);
      x = alloc<float>(rows * H);
      q = alloc<float>(rows * Q);
      k = alloc<float>(rows * KV);
      v = alloc<float>(rows * KV);
      proj = alloc<float>(rows * H);
      gate_up = alloc<float>(rows * std::max(2 * F, Q + 2 * KV));
      normed = alloc<uint16_t>(rows * H);
      attn = alloc<uint16_t>(rows * Q);
      act = alloc<uint16_t>(rows * F);
      tokens = alloc<uint32_t>(rows);
      positions = alloc<int64_t>(rows);
      context = alloc<int64_t>(rows);
      rope_positions = alloc<int64_t>(rows);
      table_begin = alloc<uint32_t>(rows);
      tile_rows = alloc<uint32_t>(2 * uint64_t{rows});
      capacity_rows = rows;
    }
    if (seqs > capacity_seqs) {
      for (void* p : {(void*)last, (void*)last_normed, (void*)logits, (void*)best_token})
        release(p);
      // One allocation, so that one download brings a step's tokens and logits.
      static_assert(sizeof(uint32_t) == sizeof(float));
      best_token = alloc<uint32_t>(2 * uint64_t{seqs});
      best_logit = reinterpret_cast<float*>(best_token + seqs);
      last = alloc<float>(seqs * H);
      last_normed = alloc<uint16_t>(seqs * H);
      logits = alloc<float>(uint64_t{seqs} * c.vocab);
      capacity_seqs = seqs;
    }
    if (table_entries > capacity_tables) {
      release(tables);
      tables = alloc<uint32_t>(table_entries);
      capacity_tables = table_entries;
    }
    if (scratch_floats > capacity_scratch) {
      release(scratch);
      scratch = alloc<float>(scratch_floats);
      capacity_scratch = scratch_floats;
    }
    return error.empty();
  }

  void launch(std::span<const sequence_input> batch) {
    const uint32_t H = c.hidden, D = c.head_dim, Q = c.q_heads * D, KV = c.kv_heads * D, F = c.intermediate;
    const bool tensor_cores = D == 128 && (c.group() == 1 || c.group() == 2 || c.group() == 4 || c.group() == 8);
    // With tensor cores, sequences of one query row go first and take the
    // decode kernel, whose partitions spread a long context over many SMs;
    // the chunks' rows follow and take the chunked-prefill kernel. (Served as
    // one-row tiles of the prefill kernel, a 16k-token context beside a chunk
    // was one thread block's sweep: the step's critical path.)
    std::vector<size_t> order;
    uint32_t decode_rows = 0;
    uint64_t chunk_rows = 0;
    int64_t longest_chunk = 1; // the chunks' longest reach in table entries
    for (size_t i = 0; i < batch.size(); ++i)
      if (tensor_cores && batch[i].tokens.size() == 1)
        order.push_back(i), ++decode_rows;
    for (size_t i = 0; i < batch.size(); ++i)
      if (!tensor_cores || batch[i].tokens.size() != 1) {
        const auto& s = batch[i];
        order.push_back(i), chunk_rows += s.tokens.size();
        longest_chunk = std::max<int64_t>(longest_chunk,
                                          static_cast<int64_t>(s.first_position + s.tokens.size() - s.dropped_tokens));
      }
    std::vector<uint32_t> h_tokens, h_begin, h_tables, h_tiles, h_mass_rows, h_mass_sequences;
    uint32_t mass_stride = 0;
    mass_at.assign(batch.size(), -1);
    mass_sizes.assign(batch.size(), 0);
    mass_floats = 0;
    const int tile_tokens = cuda::paged_prefill_tile_tokens(
        static_cast<int>(c.group()), static_cast<int64_t>(std::max<uint64_t>(chunk_rows, 1)),
        static_cast<int>(c.kv_heads), longest_chunk, multiprocessors);
    // h_pos and h_ctx count table entries (position - dropped_tokens: a
    // compacted table skips dropped blocks); h_rope keeps the positions.
    std::vector<int64_t> h_pos, h_ctx, h_rope;
    last_rows.assign(batch.size(), 0);
    int64_t longest = 1, longest_decode = 1;
    bool streams = false;
    for (const auto& s : batch) {
      const uint64_t B = pool.block_tokens, end = s.first_position + s.tokens.size() - s.dropped_tokens;
      for (uint64_t b = 0; b < s.block_table.size(); ++b) {
        if (!paged_kv_pool::streamed(s.block_table[b]))
          continue;
        streams = true;
        KVTIER_CHECK(b < (s.context_tokens - s.dropped_tokens) / B || b * B >= end,
                     "cuda_forward: a block the step writes is streamed from DRAM; it must be in HBM");
      }
    }
    KVTIER_CHECK(!streams || pool.dram_consistent(),
                 "cuda_forward: a streamed block but the pool view has no DRAM pool");
    for (size_t seq : order) {
      const auto& s = batch[seq];
      auto begin = static_cast<uint32_t>(h_tables.size());
      h_tables.insert(h_tables.end(), s.block_table.begin(), s.block_table.end());
      const bool decode_row = h_tokens.size() < decode_rows;
      for (size_t t = 0; !decode_row && t < s.tokens.size(); t += static_cast<size_t>(tile_tokens)) {
        h_tiles.push_back(static_cast<uint32_t>(h_tokens.size() + t));
        h_tiles.push_back(static_cast<uint32_t>(std::min(s.tokens.size() - t, static_cast<size_t>(tile_tokens))));
      }
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        h_tokens.push_back(s.tokens[i]);
        h_pos.push_back(static_cast<int64_t>(s.first_position + i - s.dropped_tokens));
        h_ctx.push_back(static_cast<int64_t>(s.context_tokens - s.dropped_tokens));
        h_rope.push_back(static_cast<int64_t>(s.first_position + i));
        h_begin.push_back(begin);
      }
      longest = std::max<int64_t>(longest, static_cast<int64_t>(s.first_position + s.tokens.size() - s.dropped_tokens));
      if (decode_row)
        longest_decode =
            std::max<int64_t>(longest_decode, static_cast<int64_t>(s.first_position + 1 - s.dropped_tokens));
      last_rows[seq] = static_cast<uint32_t>(h_tokens.size() - 1);
      if (s.want_block_mass) {
        // As the CPU twin: the last mass_queries rows (at least 1) sum into
        // block_mass, the last row alone also into last_block_mass.
        const auto table = static_cast<uint32_t>(s.block_table.size());
        mass_at[seq] = static_cast<int64_t>(mass_floats);
        mass_sizes[seq] = table;
        const size_t n = s.tokens.size(), from = n - std::clamp<size_t>(s.mass_queries, 1, n);
        h_mass_sequences.insert(h_mass_sequences.end(),
                                {static_cast<uint32_t>(h_mass_rows.size()), static_cast<uint32_t>(n - from),
                                 static_cast<uint32_t>(mass_floats), static_cast<uint32_t>(mass_floats + table),
                                 table});
        for (size_t i = from; i < n; ++i)
          h_mass_rows.push_back(static_cast<uint32_t>(h_tokens.size() - n + i));
        mass_floats += 2 * uint64_t{table};
        mass_stride = std::max(mass_stride, table);
      }
    }
    KVTIER_CHECK(h_mass_rows.empty() || !pool.kv_fp8, "cuda_forward: block mass over float8 KV is not built");
    const auto rows = static_cast<uint32_t>(h_tokens.size());
    // Enough blocks to fill the GPU: split long contexts, at least 64 positions a piece.
    uint64_t per_split = uint64_t{rows} * c.kv_heads;
    auto splits = static_cast<uint32_t>(
        std::clamp<uint64_t>((264 + per_split - 1) / per_split, 1, static_cast<uint64_t>((longest + 63) / 64)));
    auto split_tokens = static_cast<uint32_t>((longest + splits - 1) / splits);
    // On tensor cores where the head shape allows: the decode kernel for the
    // leading one-row sequences, the chunked-prefill kernel for the rest;
    // otherwise the general CUDA-core kernel for all.
    cuda::paged_decode_args decode;
    decode.batch = static_cast<int32_t>(decode_rows);
    decode.q_heads = static_cast<int32_t>(c.q_heads);
    decode.kv_heads = static_cast<int32_t>(c.kv_heads);
    decode.head_dim = static_cast<int32_t>(D);
    decode.block_tokens = static_cast<int32_t>(pool.block_tokens);
    decode.max_context = static_cast<int32_t>(longest_decode);
    decode.scale = 1.0f / std::sqrt(static_cast<float>(D));
    decode.slot_stride = pool.layout.layer_bytes;
    decode.kv_fp8 = pool.kv_fp8;
    decode.k_scale = pool.k_scale;
    decode.v_scale = pool.v_scale;
    const bool decode_tc = decode_rows > 0;
    const bool prefill_tc = tensor_cores && chunk_rows > 0;
    uint64_t scratch_floats = tensor_cores ? 1 : cuda::attention_scratch_floats(rows, c.q_heads, D, splits);
    if (decode_tc)
      scratch_floats = (cuda::paged_decode_tc_workspace_bytes(decode, multiprocessors) + 3) / 4;
    // The prefill kernel's split over the context shares the scratch: it runs
    // after the decode kernel's merge on the same stream.
    const int prefill_splits = prefill_tc
        ? cuda::paged_prefill_splits(static_cast<int>(h_tiles.size() / 2), static_cast<int>(c.kv_heads), tile_tokens,
                                     static_cast<int>(c.group()), longest_chunk, multiprocessors)
        : 1;
    scratch_floats = std::max(scratch_floats,
                              cuda::paged_prefill_workspace_floats(static_cast<uint32_t>(chunk_rows),
                                                                   static_cast<int>(c.q_heads), prefill_splits));
    KVTIER_CHECK(!streams || tensor_cores, "cuda_forward: streamed blocks need the tensor-core kernels (head_dim 128)");
    KVTIER_CHECK(!pool.kv_fp8 || (tensor_cores && chunk_rows == 0),
                 "cuda_forward: float8 KV is read by the decode kernel only; a prefill chunk needs bf16 KV");
    if (!reserve(rows, static_cast<uint32_t>(batch.size()), h_tables.size(), scratch_floats))
      return;
    if (mass_floats > capacity_mass) {
      release(mass);
      mass = alloc<float>(mass_floats);
      capacity_mass = mass_floats;
    }
    const uint64_t index_entries = h_mass_rows.size() + h_mass_sequences.size();
    if (index_entries > capacity_mass_index) {
      release(mass_index);
      mass_index = alloc<uint32_t>(index_entries);
      capacity_mass_index = index_entries;
    }
    const uint64_t partial_floats = uint64_t{h_mass_rows.size()} * c.q_heads * mass_stride;
    if (partial_floats > capacity_mass_partial) {
      release(mass_partial);
      mass_partial = alloc<float>(partial_floats);
      capacity_mass_partial = partial_floats;
    }
    if (!error.empty())
      return;
    bool staged_ok = true;
    const uint32_t staged =
        streams ? stager.plan(h_tables, pool.layout.slots, pool.layout.layer_bytes, staged_ok, error) : 0;
    if (!staged_ok)
      return;
    last_staged_bytes = stager.bytes_per_layer() * (staged ? c.layers : 0);
    using cuda::pinned_staging;
    const uint64_t upload_bytes = pinned_staging::upload_bytes(h_tokens) + pinned_staging::upload_bytes(h_pos) +
        pinned_staging::upload_bytes(h_ctx) + pinned_staging::upload_bytes(h_rope) +
        pinned_staging::upload_bytes(h_begin) + pinned_staging::upload_bytes(h_tables) +
        pinned_staging::upload_bytes(h_tiles) + pinned_staging::upload_bytes(h_mass_rows) +
        pinned_staging::upload_bytes(h_mass_sequences);
    std::string no_pinned;
    const bool pinned = staging.begin_uploads(upload_bytes, no_pinned);
    auto up_copy = [&](auto* dst, const auto& src) {
      if (pinned)
        staging.upload(dst, src, stream);
      else // pageable: correct, but the copy is synchronous
        cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(src[0]), cudaMemcpyHostToDevice, stream);
    };
    up_copy(tokens, h_tokens);
    up_copy(positions, h_pos);
    up_copy(context, h_ctx);
    up_copy(rope_positions, h_rope);
    up_copy(table_begin, h_begin);
    up_copy(tables, h_tables);
    if (prefill_tc)
      up_copy(tile_rows, h_tiles);
    const auto mass_count = static_cast<uint32_t>(h_mass_rows.size());
    if (mass_count > 0) {
      up_copy(mass_index, h_mass_rows);
      up_copy(mass_index + h_mass_rows.size(), h_mass_sequences);
      cudaMemsetAsync(mass, 0, mass_floats * sizeof(float), stream);
    }
    if (pinned)
      staging.end_uploads(stream);
    cuda::paged_prefill_args prefill;
    prefill.q = q;
    prefill.out = attn;
    prefill.pool = pool.base;
    prefill.slot_stride = pool.layout.layer_bytes;
    prefill.tables = tables;
    prefill.table_begin = table_begin;
    prefill.positions = positions;
    prefill.tile_rows = tile_rows;
    prefill.tiles = static_cast<int32_t>(h_tiles.size() / 2);
    prefill.tile_tokens = tile_tokens;
    prefill.q_heads = static_cast<int32_t>(c.q_heads);
    prefill.kv_heads = static_cast<int32_t>(c.kv_heads);
    prefill.head_dim = static_cast<int32_t>(D);
    prefill.block_tokens = static_cast<int32_t>(pool.block_tokens);
    prefill.scale = decode.scale;
    prefill.splits = prefill_splits;
    prefill.first_row = decode_rows;
    prefill.rows = static_cast<uint32_t>(chunk_rows);
    cuda::paged_rows r;
    r.pool = reinterpret_cast<const uint16_t*>(pool.base);
    r.slots = pool.layout.slots;
    r.kv_heads = c.kv_heads;
    r.head_dim = D;
    r.block_tokens = pool.block_tokens;
    r.positions = positions;
    r.context = context;
    r.rope_positions = rope_positions;
    r.table_begin = table_begin;
    r.tables = tables;
    r.rows = rows;
    auto* pool_bf16 = reinterpret_cast<uint16_t*>(pool.base);
    const auto eps = static_cast<float>(c.rms_eps);
    if (staged)
      stager.prime(pool.dram_base, pool.dram_layout);
    cuda::embed(embed, tokens, rows, H, x, stream);
    cuda::rms_norm(x, layers[0].attn_norm, rows, H, eps, normed, stream);
    for (uint32_t l = 0; l < c.layers; ++l) {
      const auto& w = layers[l];
      // `normed` holds this layer's attention norm: the first layer's from
      // above, the others' from the previous layer's last residual add.
      float* qkv = gate_up;
      gemm(w.wqkv, Q + 2 * KV, H, normed, qkv, rows);
      cuda::split_qkv_rope(qkv, q, k, v, r, c.q_heads, inv_freq, stream);
      if (pool.kv_fp8)
        cuda::store_kv_fp8(k, v, r, l, reinterpret_cast<uint8_t*>(pool.base), pool.k_scale, pool.v_scale, stream);
      else
        cuda::store_kv(k, v, r, l, pool_bf16, stream);
      if (staged) {
        const void* buffer = stager.before_attention(l, c.layers);
        decode.staged = prefill.staged = buffer;
        decode.staged_from = prefill.staged_from = pool.layout.slots;
      }
      if (decode_tc) {
        decode.q_f32 = q;
        decode.out = attn;
        decode.pool = pool.base;
        decode.layer_offset = pool.layout.offset(0, l);
        decode.block_tables = reinterpret_cast<const int32_t*>(tables);
        decode.table_begin = table_begin;
        decode.positions = positions;
        cuda::paged_decode_attention_tc(decode, scratch, multiprocessors, stream);
      }
      if (prefill_tc) {
        prefill.layer_offset = pool.layout.offset(0, l);
        prefill.workspace = scratch;
        cuda::paged_prefill_attention_tc(prefill, stream);
      }
      if (!tensor_cores) {
        cuda::paged_attention(q, r, l, c.q_heads, split_tokens, splits, scratch, attn, nullptr, stream);
      }
      if (mass_count > 0)
        cuda::block_mass(q, r, l, c.q_heads, staged ? decode.staged : nullptr, staged ? pool.layout.slots : 0xffffffffu,
                         mass_index, mass_count, mass_index + mass_count,
                         static_cast<uint32_t>(h_mass_sequences.size() / 5), mass_stride, mass_partial, mass, stream);
      if (staged)
        stager.after_attention(l);
      gemm(w.wo, H, Q, attn, proj, rows);
      cuda::add_rms_norm(x, proj, w.mlp_norm, rows, H, eps, normed, stream);
      gemm(w.w_gate_up, 2 * F, H, normed, gate_up, rows);
      cuda::swiglu_rows(gate_up, rows, F, act, stream);
      gemm(w.w_down, H, F, act, proj, rows);
      if (l + 1 < c.layers)
        cuda::add_rms_norm(x, proj, layers[l + 1].attn_norm, rows, H, eps, normed, stream);
      else
        cuda::add_in_place(x, proj, uint64_t{rows} * H, stream);
    }
    for (size_t i = 0; i < last_rows.size(); ++i)
      cudaMemcpyAsync(last + i * H, x + uint64_t{last_rows[i]} * H, H * sizeof(float), cudaMemcpyDeviceToDevice,
                      stream);
    auto seqs = static_cast<uint32_t>(last_rows.size());
    cuda::rms_norm(last, final_norm, seqs, H, eps, last_normed, stream);
    gemm(c.tied_embeddings ? embed : lm_head, c.vocab, H, last_normed, logits, seqs);
  }
};

cuda_forward::cuda_forward(std::unique_ptr<impl> state) : impl_(std::move(state)) {
}
cuda_forward::~cuda_forward() = default;

std::unique_ptr<cuda_forward> cuda_forward::create(const llama_weights& w, const paged_kv_pool& pool,
                                                   std::string& why) {
  auto s = std::make_unique<impl>();
  if (auto problem = w.shape_problem(); !problem.empty())
    return why = problem, nullptr;
  if (!s->start(w.config, pool))
    return why = s->error, nullptr;
  s->embed = s->upload(w.embed);
  s->final_norm = s->upload(w.final_norm);
  if (!w.config.tied_embeddings)
    s->lm_head = s->upload(w.lm_head);
  for (const auto& l : w.layers)
    s->layers.push_back({s->upload(l.attn_norm), s->upload_concatenated({&l.wq, &l.wk, &l.wv}), s->upload(l.wo),
                         s->upload(l.mlp_norm), s->upload_concatenated({&l.w_gate, &l.w_up}), s->upload(l.w_down)});
  if (!s->error.empty())
    return why = s->error, nullptr;
  return std::unique_ptr<cuda_forward>(new cuda_forward(std::move(s)));
}

std::unique_ptr<cuda_forward> cuda_forward::create_random(const llama_config& c, uint64_t seed,
                                                          const paged_kv_pool& pool, std::string& why) {
  auto s = std::make_unique<impl>();
  if (!s->start(c, pool))
    return why = s->error, nullptr;
  const uint64_t H = c.hidden, Q = uint64_t{c.q_heads} * c.head_dim, KV = uint64_t{c.kv_heads} * c.head_dim,
                 F = c.intermediate, V = c.vocab;
  uint64_t tensor = seed * 1000;
  auto proj = [&](uint64_t out, uint64_t in) {
    return s->random(out * in, 0, 1 / std::sqrt(static_cast<float>(in)), ++tensor);
  };
  // Projections of `outs` rows each, one after another in one allocation;
  // each its own seed, so the values are those of separate tensors.
  auto projs = [&](std::initializer_list<uint64_t> outs, uint64_t in) {
    uint64_t rows = 0;
    for (uint64_t out : outs)
      rows += out;
    auto* d = s->alloc<uint16_t>(rows * in);
    uint64_t at = 0;
    for (uint64_t out : outs) {
      if (d)
        cuda::fill_random(d + at * in, out * in, 0, 1 / std::sqrt(static_cast<float>(in)), ++tensor, s->stream);
      at += out;
    }
    return d;
  };
  auto norm = [&] { return s->random(H, 1, 0.1f, ++tensor); };
  s->embed = s->random(V * H, 0, 1, ++tensor);
  for (uint32_t l = 0; l < c.layers; ++l) {
    auto* attn_norm = norm();
    auto* wqkv = projs({Q, KV, KV}, H);
    auto* wo = proj(H, Q);
    auto* mlp_norm = norm();
    auto* w_gate_up = projs({F, F}, H);
    s->layers.push_back({attn_norm, wqkv, wo, mlp_norm, w_gate_up, proj(H, F)});
  }
  s->final_norm = norm();
  if (!c.tied_embeddings)
    s->lm_head = proj(V, H);
  cudaStreamSynchronize(s->stream);
  if (!s->error.empty())
    return why = s->error, nullptr;
  return std::unique_ptr<cuda_forward>(new cuda_forward(std::move(s)));
}

void cuda_forward::apply(const kv_copy& copy) {
  auto& s = *impl_;
  const auto& p = s.pool;
  KVTIER_CHECK(!p.kv_fp8, "cuda_forward: copy-on-write copies over float8 KV are not built");
  const size_t bytes = size_t{p.head_dim} * sizeof(bf16) * copy.tokens;
  for (uint32_t l = 0; l < p.layout.layers; ++l)
    for (uint32_t h = 0; h < p.kv_heads; ++h) {
      cudaMemcpyAsync(p.key(copy.to_slot, l, h, 0), p.key(copy.from_slot, l, h, 0), bytes, cudaMemcpyDeviceToDevice,
                      s.stream);
      cudaMemcpyAsync(p.value(copy.to_slot, l, h, 0), p.value(copy.from_slot, l, h, 0), bytes, cudaMemcpyDeviceToDevice,
                      s.stream);
    }
}

void cuda_forward::launch(std::span<const sequence_input> batch) {
  impl_->launch(batch);
}

std::vector<cuda_forward::greedy_token> cuda_forward::run_greedy(std::span<const sequence_input> batch) {
  auto& s = *impl_;
  s.launch(batch);
  const auto seqs = static_cast<uint32_t>(batch.size());
  cuda::argmax_rows(s.logits, seqs, s.c.vocab, s.best_token, s.best_logit, s.stream);
  // best_logit follows best_token's capacity_seqs words (reserve).
  const uint64_t logits_at = s.capacity_seqs;
  std::vector<greedy_token> out(seqs);
  if (const uint32_t* words = s.staging.download(s.best_token, 2 * logits_at, s.stream)) {
    cudaStreamSynchronize(s.stream);
    for (uint32_t i = 0; i < seqs; ++i) {
      float value;
      std::memcpy(&value, words + logits_at + i, sizeof value);
      out[i] = {words[i], value};
    }
    return out;
  }
  std::vector<uint32_t> tokens(seqs);
  std::vector<float> values(seqs);
  cudaMemcpyAsync(tokens.data(), s.best_token, seqs * sizeof(uint32_t), cudaMemcpyDeviceToHost, s.stream);
  cudaMemcpyAsync(values.data(), s.best_logit, seqs * sizeof(float), cudaMemcpyDeviceToHost, s.stream);
  cudaStreamSynchronize(s.stream);
  for (uint32_t i = 0; i < seqs; ++i)
    out[i] = {tokens[i], values[i]};
  return out;
}

uint64_t cuda_forward::last_staged_bytes() const {
  return impl_->last_staged_bytes;
}

void cuda_forward::synchronize() {
  cudaStreamSynchronize(impl_->stream);
}

std::vector<sequence_result> cuda_forward::run(std::span<const sequence_input> batch) {
  auto& s = *impl_;
  s.launch(batch);
  std::vector<float> all(uint64_t{s.c.vocab} * batch.size());
  s.download_into(all, s.logits);
  std::vector<sequence_result> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    out[i].logits.assign(all.begin() + static_cast<std::ptrdiff_t>(i * s.c.vocab),
                         all.begin() + static_cast<std::ptrdiff_t>((i + 1) * s.c.vocab));
  auto masses = last_block_mass();
  for (size_t i = 0; i < batch.size(); ++i) {
    out[i].block_mass = std::move(masses[i].block_mass);
    out[i].last_block_mass = std::move(masses[i].last_block_mass);
  }
  return out;
}

std::vector<cuda_forward::sequence_mass> cuda_forward::last_block_mass() {
  auto& s = *impl_;
  std::vector<float> all(s.mass_floats);
  s.download_into(all, s.mass);
  std::vector<sequence_mass> out(s.mass_at.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (s.mass_at[i] < 0)
      continue;
    auto first = all.begin() + s.mass_at[i];
    const auto n = static_cast<std::ptrdiff_t>(s.mass_sizes[i]);
    out[i].block_mass.assign(first, first + n);
    out[i].last_block_mass.assign(first + n, first + 2 * n);
  }
  return out;
}

} // namespace kvtier::model
