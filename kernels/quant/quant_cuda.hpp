#pragma once
// The CUDA quantization kernels, behind a plain C++ interface (no CUDA headers
// here, so callers outside kernels/ can include it). Defined only when the
// build has nvcc (KVTIER_HAVE_CUDA); the CPU twin (quant_cpu.hpp) has the same
// formats and writes the same bytes.
//
// Device-side shape limits (the CPU twin has none beyond fits()):
//   channels % 8 == 0 and channels / 8 a power of two <= 32 for fp8_token,
//   int8_token (head_dim 16..256); channels % 8 == 0 for the others;
//   fp8_tensor at most 65535 slices; the
//   input, output and scale area 16-byte aligned (packed tiles keep the
//   scale area at payload_bytes, so payload_bytes % 16 == 0).
// Functions return 0 or a CUDA error code; `error` (when given) gets a line.

#include "kernels/quant/quant_format.hpp"

#include <cstdint>
#include <string>

namespace kvtier::quant::gpu {

/// True if a CUDA device can be used (any CUDA error counts as "no GPU").
bool available();

/// True if the device kernels accept this scheme and shape.
bool supports(scheme s, const tile_shape& shape);

/// Launches on `stream` (a cudaStream_t; nullptr = default). Pointers are device memory.
int quantize(scheme s, const tile_shape& shape, const void* in, void* out, void* stream);
int dequantize(scheme s, const tile_shape& shape, const void* in, void* out, void* stream);

/// For tests: copies `in` to the device, quantizes, dequantizes, copies the
/// packed tile (packed_bytes) and the fp16 result back to the host.
int round_trip_host(scheme s, const tile_shape& shape, const uint16_t* in, uint8_t* packed, uint16_t* out,
                    std::string* error);

/// For the benchmark: median milliseconds over `reps` launches of each, on
/// random fp16 data, with a device-to-device copy of the fp16 tile timed in
/// the same run (CUDA events, warm-up first). Size the tile well past L2 (60 MB).
struct timing {
  double quantize_ms = 0;
  double dequantize_ms = 0;
  double copy_ms = 0; // cudaMemcpyAsync device-to-device of elements * 2 bytes
  std::string device;
};
int time_kernels(scheme s, const tile_shape& shape, int reps, timing* out, std::string* error);

} // namespace kvtier::quant::gpu
