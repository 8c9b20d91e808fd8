#pragma once
// Element types a KV cache can be stored in, and what each costs in bytes.
//
// Quantized types carry scales: fp8 and int8 keep one fp16 scale per
// (token, layer, kv head, K or V) vector of head_dim elements; int4 keeps an
// fp16 scale and an fp16 zero point per group of 32 elements (KIVI-style
// asymmetric groups); int4_row one scale and zero per head_dim vector (coarser
// groups, fewer bytes: 3.76x below fp16 at head_dim 128 where int4 has 3.2x).
// That overhead is part of every byte count kvtier prints.
//
// The enumerators' values are fixed: the NVMe and remote tiers write them into
// each block's header to name the payload's format.

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvtier {

enum class kv_dtype : uint8_t { fp16, bf16, fp8, int8, int4, int4_row };

struct dtype_layout {
  uint32_t bits;              // bits per stored element
  uint32_t group_elements;    // elements sharing one scale group; 0 = no scales
  uint32_t scale_group_bytes; // bytes of scale (+ zero point) per group
};

dtype_layout layout_of(kv_dtype dtype);
std::string_view name_of(kv_dtype dtype);
std::optional<kv_dtype> parse_dtype(std::string_view text);

/// Bytes to store `elements` values of a vector of `vector_elements`
/// (head_dim) elements each, scales included. REQUIRES: elements % vector_elements == 0.
uint64_t stored_bytes(kv_dtype dtype, uint64_t elements, uint32_t vector_elements);

} // namespace kvtier
