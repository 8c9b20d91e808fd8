#include "experiment/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvtier::experiment {
namespace {

// The frame: plot area inside margins for ticks, labels and the legend.
constexpr double width = 640, height = 360;
constexpr double left = 64, right = 16, top = 32, bottom = 48;
constexpr double plot_w = plot_width, plot_h = plot_height;
static_assert(plot_w == width - left - right && plot_h == height - top - bottom);
constexpr int ticks = 5;
constexpr size_t legend_max = 10;

double nice_step(double span) {
  double raw = span / ticks;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * power >= raw)
      return m * power;
  return 10 * power;
}

std::string number(double v) {
  if (v == 0)
    return "0";
  double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3)
    return fmt::format("{:.3g}", v);
  return fmt::format("{:.4g}", v);
}

struct frame {
  double x_lo, x_hi, y_lo, y_hi;
  double x(double v) const { return left + (x_hi > x_lo ? (v - x_lo) / (x_hi - x_lo) : 0.5) * plot_w; }
  double y(double v) const { return top + plot_h - (y_hi > y_lo ? (v - y_lo) / (y_hi - y_lo) : 0.5) * plot_h; }
};

std::string open_plot(const std::string& title, const frame& f) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">"
                     "<g class=\"plot\" data-title=\"{}\" data-x-range=\"{} {}\" data-y-range=\"{} {}\">"
                     "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>"
                     "<text x=\"{}\" y=\"20\" font-size=\"14\" font-family=\"sans-serif\">{}</text>",
                     width, height, width, height, escaped(title), number(f.x_lo), number(f.x_hi), number(f.y_lo),
                     number(f.y_hi), width, height, left, escaped(title));
}

std::string axes(const frame& f, const std::string& x_label, const std::string& y_label, bool x_ticks) {
  std::string out;
  double ystep = nice_step(f.y_hi - f.y_lo);
  for (double v = f.y_lo; v <= f.y_hi + ystep * 1e-9; v += ystep)
    out += fmt::format("<text class=\"ytick\" x=\"{}\" y=\"{:.1f}\" font-size=\"11\" font-family=\"sans-serif\" "
                       "text-anchor=\"end\">{}</text>",
                       left - 4, f.y(v) + 4, number(v));
  if (x_ticks) {
    double xstep = nice_step(f.x_hi - f.x_lo);
    for (double v = f.x_lo; v <= f.x_hi + xstep * 1e-9; v += xstep)
      out += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{}\" font-size=\"11\" font-family=\"sans-serif\" "
                         "text-anchor=\"middle\">{}</text>",
                         f.x(v), top + plot_h + 14, number(v));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" font-family=\"sans-serif\" "
                     "text-anchor=\"middle\">{}</text>",
                     left + plot_w / 2, height - 8, escaped(x_label));
  out += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"12\" font-family=\"sans-serif\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 14 {})\">{}</text>",
                     top + plot_h / 2, top + plot_h / 2, escaped(y_label));
  return out;
}

// The frame goes last, over the lines and bars that reach the plot's edges.
std::string close_plot() {
  return fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                     "stroke=\"#999999\" shape-rendering=\"crispEdges\"/></g></svg>",
                     left, top, plot_w, plot_h);
}

} // namespace

std::pair<double, double> nice_range(double lo, double hi) {
  if (!(hi > lo)) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.5;
    lo -= pad;
    hi += pad;
    if (lo < 0 && lo + pad >= 0)
      lo = 0;
  }
  double step = nice_step(hi - lo);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_line_chart(const line_chart& c) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : c.lines)
    for (auto [x, y] : s.points) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  if (c.y_limit) {
    y_lo = std::min(y_lo, *c.y_limit);
    y_hi = std::max(y_hi, *c.y_limit);
  }
  if (!std::isfinite(x_lo))
    x_lo = x_hi = y_lo = y_hi = 0;
  frame f{};
  if (c.x_categories.empty())
    std::tie(f.x_lo, f.x_hi) = nice_range(std::min(x_lo, 0.0), x_hi);
  else
    std::tie(f.x_lo, f.x_hi) = std::pair{-0.5, double(c.x_categories.size()) - 0.5};
  std::tie(f.y_lo, f.y_hi) = c.y_fixed ? *c.y_fixed : nice_range(std::min(y_lo, 0.0), y_hi);
  std::string out = open_plot(c.title, f) + axes(f, c.x_label, c.y_label, c.x_categories.empty());
  for (size_t i = 0; i < c.x_categories.size(); ++i)
    out += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{}\" font-size=\"11\" font-family=\"sans-serif\" "
                       "text-anchor=\"middle\">{}</text>",
                       f.x(double(i)), top + plot_h + 14, escaped(c.x_categories[i]));
  if (c.y_limit)
    out += fmt::format("<line class=\"limit\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>",
                       left, left + plot_w, f.y(*c.y_limit), f.y(*c.y_limit), limit_colour);
  size_t legend = 0;
  for (const auto& s : c.lines) {
    std::string pts;
    for (auto [x, y] : s.points)
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", f.x(x), f.y(y));
    out += fmt::format("<polyline class=\"series\" data-name=\"{}\" data-points=\"{}\" points=\"{}\" fill=\"none\" "
                       "stroke=\"{}\" stroke-width=\"3\" shape-rendering=\"crispEdges\"{}/>",
                       escaped(s.name), s.points.size(), pts, s.colour, s.dashed ? " stroke-dasharray=\"8 4\"" : "");
    if (s.points.size() == 1) // a lone point: a mark, so it shows
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"8\" height=\"8\" fill=\"{}\"/>",
                         f.x(s.points[0].first) - 4, f.y(s.points[0].second) - 4, s.colour);
    if (legend < legend_max && !s.dashed) {
      double ly = top + 8 + 14 * double(legend++);
      out += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                         "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" font-family=\"sans-serif\">{}</text>",
                         left + plot_w - 170, ly, s.colour, left + plot_w - 156, ly + 9, escaped(s.name));
    }
  }
  return out + close_plot();
}

std::string svg_bar_chart(const bar_chart& c) {
  double hi = 0;
  for (const auto& b : c.bars)
    hi = std::max({hi, b.value, b.bound.value_or(0)});
  frame f{-0.5, double(c.bars.size()) - 0.5, 0, 0};
  std::tie(f.y_lo, f.y_hi) = nice_range(0, hi);
  std::string out = open_plot(c.title, f) + axes(f, "", c.y_label, false);
  double slot = plot_w / double(std::max<size_t>(1, c.bars.size()));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    double x = f.x(double(i)) - slot * 0.35;
    out += fmt::format("<rect class=\"bar\" data-name=\"{}\" data-value=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" "
                       "width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" shape-rendering=\"crispEdges\"/>",
                       escaped(b.name), number(b.value), x, f.y(b.value), slot * 0.7, f.y(0) - f.y(b.value),
                       palette[i % palette.size()]);
    if (b.bound)
      out += fmt::format("<line class=\"bound\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                         "stroke-width=\"2\" stroke-dasharray=\"4 3\"/>",
                         x, x + slot * 0.7, f.y(*b.bound), f.y(*b.bound), limit_colour);
    out += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{}\" font-size=\"10\" font-family=\"sans-serif\" "
                       "text-anchor=\"middle\">{}</text>",
                       f.x(double(i)), top + plot_h + 14,
                       escaped(b.name.size() > 24 ? b.name.substr(0, 23) + "…" : b.name));
  }
  return out + close_plot();
}

} // namespace kvtier::experiment
