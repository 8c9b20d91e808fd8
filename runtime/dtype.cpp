#include "runtime/dtype.hpp"

#include "runtime/check.hpp"

namespace kvtier {

dtype_layout layout_of(kv_dtype dtype) {
  switch (dtype) {
    case kv_dtype::fp16:
    case kv_dtype::bf16:
      return {16, 0, 0};
    case kv_dtype::fp8:
    case kv_dtype::int8:
      return {8, 0, 2}; // group = one head_dim vector, fp16 scale
    case kv_dtype::int4:
      return {4, 32, 4}; // fp16 scale + fp16 zero per 32 elements
    case kv_dtype::int4_row:
      return {4, 0, 4}; // fp16 scale + fp16 zero per head_dim vector
  }
  return {16, 0, 0};
}

std::string_view name_of(kv_dtype dtype) {
  switch (dtype) {
    case kv_dtype::fp16:
      return "fp16";
    case kv_dtype::bf16:
      return "bf16";
    case kv_dtype::fp8:
      return "fp8";
    case kv_dtype::int8:
      return "int8";
    case kv_dtype::int4:
      return "int4";
    case kv_dtype::int4_row:
      return "int4_row";
  }
  return "?";
}

std::optional<kv_dtype> parse_dtype(std::string_view text) {
  for (auto d : {kv_dtype::fp16, kv_dtype::bf16, kv_dtype::fp8, kv_dtype::int8, kv_dtype::int4, kv_dtype::int4_row})
    if (name_of(d) == text)
      return d;
  if (text == "float16" || text == "half")
    return kv_dtype::fp16;
  if (text == "bfloat16")
    return kv_dtype::bf16;
  if (text == "fp8_e4m3" || text == "e4m3")
    return kv_dtype::fp8;
  return std::nullopt;
}

uint64_t stored_bytes(kv_dtype dtype, uint64_t elements, uint32_t vector_elements) {
  KVTIER_CHECK(vector_elements > 0 && elements % vector_elements == 0, "stored_bytes: partial vector");
  auto layout = layout_of(dtype);
  uint64_t payload = elements * layout.bits / 8;
  if (layout.scale_group_bytes == 0)
    return payload;
  uint32_t group = layout.group_elements == 0 ? vector_elements : layout.group_elements;
  uint64_t vectors = elements / vector_elements;
  uint64_t groups_per_vector = (vector_elements + group - 1) / group;
  return payload + vectors * groups_per_vector * layout.scale_group_bytes;
}

} // namespace kvtier
