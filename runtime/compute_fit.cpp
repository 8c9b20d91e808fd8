#include "runtime/compute_fit.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvtier {

namespace {

/// Interpolation weights of `x` over `knots` (two neighbours, or the end rule).
std::vector<double> knot_weights(const std::vector<double>& knots, double x) {
  std::vector<double> w(knots.size(), 0.0);
  if (knots.size() == 1 || x <= knots.front()) {
    w.front() = 1;
    return w;
  }
  size_t hi = 1;
  while (hi + 1 < knots.size() && x > knots[hi])
    ++hi;
  const double t = (x - knots[hi - 1]) / (knots[hi] - knots[hi - 1]); // > 1 beyond the last knot
  w[hi - 1] = 1 - t;
  w[hi] = t;
  return w;
}

/// Solves the square system a x = b by Gaussian elimination with partial
/// pivoting; false when singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col]))
        pivot = r;
    if (std::abs(a[pivot][col]) < 1e-12)
      return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (size_t r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c < n; ++c)
        a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  x.assign(n, 0);
  for (size_t r = n; r-- > 0;) {
    double v = b[r];
    for (size_t c = r + 1; c < n; ++c)
      v -= a[r][c] * x[c];
    x[r] = v / a[r][r];
  }
  return true;
}

} // namespace

double dense_seconds(const measured_compute& c, double tokens) {
  auto w = knot_weights(c.dense_tokens, tokens);
  double ms = 0;
  for (size_t i = 0; i < w.size(); ++i)
    ms += w[i] * c.dense_ms[i];
  return ms * 1e-3;
}

double predict_seconds(const measured_compute& c, const compute_sample& s) {
  double t = dense_seconds(c, static_cast<double>(s.new_tokens));
  const double mixed = c.mixed_decode_attention_gbps > 0 ? c.mixed_decode_attention_gbps : c.decode_attention_gbps;
  if (s.decode_only && c.decode_attention_gbps > 0)
    t += s.kv_bytes / (c.decode_attention_gbps * 1e9);
  if (!s.decode_only && mixed > 0)
    t += s.kv_bytes / (mixed * 1e9);
  if (!s.decode_only && c.prefill_attention_tflops > 0)
    t += s.attention_flops / (c.prefill_attention_tflops * 1e12);
  return t;
}

caf::expected<measured_compute> fit_compute(std::span<const compute_sample> samples, const std::vector<double>& knots,
                                            const std::string& model, compute_fit_report* report) {
  if (knots.empty() || !std::is_sorted(knots.begin(), knots.end()) ||
      std::adjacent_find(knots.begin(), knots.end()) != knots.end())
    return make_error(errc::invalid_argument, "fit_compute: knots must be distinct and ascending");
  // The mixed rate needs steps with both a chunk and decode rows.
  bool use_mixed = std::any_of(samples.begin(), samples.end(),
                               [](const compute_sample& s) { return !s.decode_only && s.kv_bytes > 0; });
  bool use_decode = true, use_prefill = true;
  std::string note;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const size_t k = knots.size();
    const size_t n = k + (use_decode ? 1 : 0) + (use_prefill ? 1 : 0) + (use_mixed ? 1 : 0);
    if (samples.size() < n)
      return make_error(errc::invalid_argument,
                        fmt::format("fit_compute: {} samples for {} unknowns", samples.size(), n));
    // Rows scaled by 1 / measured (relative error); columns by their largest
    // entry, so that seconds, bytes and FLOPs meet as numbers near 1.
    std::vector<std::vector<double>> rows;
    for (const auto& s : samples) {
      auto row = knot_weights(knots, static_cast<double>(s.new_tokens));
      if (use_decode)
        row.push_back(s.decode_only ? s.kv_bytes : 0.0);
      if (use_prefill)
        row.push_back(s.decode_only ? 0.0 : s.attention_flops);
      if (use_mixed)
        row.push_back(s.decode_only ? 0.0 : s.kv_bytes);
      for (auto& v : row)
        v /= s.seconds;
      rows.push_back(std::move(row));
    }
    std::vector<double> scale(n, 0.0);
    for (const auto& r : rows)
      for (size_t c = 0; c < n; ++c)
        scale[c] = std::max(scale[c], std::abs(r[c]));
    for (size_t c = 0; c < n; ++c)
      if (scale[c] == 0)
        return make_error(errc::invalid_argument,
                          fmt::format("fit_compute: no sample informs unknown {} (a knot without samples?)", c));
    std::vector<std::vector<double>> normal(n, std::vector<double>(n, 0.0));
    std::vector<double> rhs(n, 0.0);
    for (const auto& r : rows)
      for (size_t i = 0; i < n; ++i) {
        rhs[i] += r[i] / scale[i]; // the target is 1 (measured / measured)
        for (size_t j = 0; j < n; ++j)
          normal[i][j] += r[i] / scale[i] * r[j] / scale[j];
      }
    std::vector<double> x;
    if (!solve(normal, rhs, x))
      return make_error(errc::invalid_argument, "fit_compute: the samples do not determine the model (singular)");
    for (size_t i = 0; i < n; ++i)
      x[i] /= scale[i];
    size_t at = k;
    const double decode_rate = use_decode ? x[at++] : 0;
    const double prefill_rate = use_prefill ? x[at++] : 0;
    const double mixed_rate = use_mixed ? x[at++] : 0;
    if (use_decode && decode_rate <= 0) {
      use_decode = false;
      note += "decode attention came out non-positive and folds into dense; ";
      continue;
    }
    if (use_prefill && prefill_rate <= 0) {
      use_prefill = false;
      note += "prefill attention came out non-positive and folds into dense; ";
      continue;
    }
    if (use_mixed && mixed_rate <= 0) {
      use_mixed = false;
      note += "decode rows beside a prefill chunk came out non-positive and fold into dense; ";
      continue;
    }
    measured_compute c;
    c.model = model;
    c.dense_tokens = knots;
    for (size_t i = 0; i < k; ++i)
      c.dense_ms.push_back(x[i] * 1e3);
    c.decode_attention_gbps = use_decode ? 1.0 / decode_rate / 1e9 : 0;
    c.prefill_attention_tflops = use_prefill ? 1.0 / prefill_rate / 1e12 : 0;
    c.mixed_decode_attention_gbps = use_mixed ? 1.0 / mixed_rate / 1e9 : 0;
    if (report) {
      report->note = note;
      report->mean_relative_error = report->max_relative_error = 0;
      for (const auto& s : samples) {
        const double e = std::abs(predict_seconds(c, s) - s.seconds) / s.seconds;
        report->mean_relative_error += e / static_cast<double>(samples.size());
        report->max_relative_error = std::max(report->max_relative_error, e);
      }
    }
    return c;
  }
  return make_error(errc::invalid_argument, "fit_compute: no attention rate fits");
}

} // namespace kvtier
