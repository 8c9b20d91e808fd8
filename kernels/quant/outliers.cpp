#include "kernels/quant/outliers.hpp"

#include "kernels/quant/half.hpp"
#include "runtime/check.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvtier::quant {

std::vector<uint32_t> select_outlier_channels(const uint16_t* x, uint64_t rows, uint32_t channels, uint32_t count) {
  KVTIER_CHECK(count <= channels, "select_outlier_channels: more outliers than channels");
  std::vector<float> amax(channels, 0.0f);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < channels; ++c)
      amax[c] = std::max(amax[c], std::fabs(half_to_float(x[r * channels + c])));
  std::vector<uint32_t> order(channels);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return amax[a] > amax[b]; });
  order.resize(count);
  std::sort(order.begin(), order.end());
  return order;
}

outlier_split split_outliers(uint16_t* x, uint64_t rows, uint32_t channels, std::vector<uint32_t> chosen) {
  outlier_split out;
  out.channels = std::move(chosen);
  out.values.resize(rows * out.channels.size());
  for (uint64_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < out.channels.size(); ++i) {
      KVTIER_CHECK(out.channels[i] < channels, "split_outliers: channel out of range");
      out.values[r * out.channels.size() + i] = x[r * channels + out.channels[i]];
      x[r * channels + out.channels[i]] = 0;
    }
  return out;
}

void merge_outliers(const outlier_split& split, uint16_t* x, uint64_t rows, uint32_t channels) {
  for (uint64_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < split.channels.size(); ++i)
      x[r * channels + split.channels[i]] = split.values[r * split.channels.size() + i];
}

} // namespace kvtier::quant
