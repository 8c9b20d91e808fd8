#pragma once
// Outlier channels kept in fp16. Keys of real models carry a few channels with
// magnitudes far above the rest (KIVI, KVQuant); quantizing them with the rest
// inflates every scale. The split moves those channels aside in fp16, zeroes
// them in the tile so they do not enter any scale, and merge puts them back.
//
// Stored bytes: 2 per outlier index (uint16) + 2 per outlier value.

#include <cstdint>
#include <vector>

namespace kvtier::quant {

struct outlier_split {
  std::vector<uint32_t> channels; // ascending
  std::vector<uint16_t> values;   // rows x channels.size(), row-major, fp16 bits
};

/// The `count` channels with the largest max |x| over all rows, ascending;
/// ties go to the lower channel. REQUIRES: count <= channels.
std::vector<uint32_t> select_outlier_channels(const uint16_t* x, uint64_t rows, uint32_t channels, uint32_t count);

/// Copies the chosen channels out of `x` and zeroes them there.
outlier_split split_outliers(uint16_t* x, uint64_t rows, uint32_t channels, std::vector<uint32_t> chosen);

/// Writes the saved channels back into `x`.
void merge_outliers(const outlier_split& split, uint16_t* x, uint64_t rows, uint32_t channels);

inline uint64_t outlier_bytes(uint64_t rows, uint32_t count) {
  return uint64_t{count} * 2 + rows * count * 2;
}

} // namespace kvtier::quant
