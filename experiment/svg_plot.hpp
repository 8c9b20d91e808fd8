#pragma once
// Plots as inline SVG text, for the experiment's self-contained report: line
// charts (CDFs, series over time, a metric along a swept key) and bar charts.
// No script, no external reference: the page draws with the browser alone.
//
// The output is exact and machine-checkable: each plot is a <g class="plot">
// with data-x-range / data-y-range (the axes' ends after rounding to nice
// numbers), each line a <polyline class="series"> with data-name and
// data-points, each bar a <rect class="bar">. Lines and bars are drawn with
// shape-rendering="crispEdges" in the palette's colours, so a screenshot
// holds pixels of exactly those colours inside the plot's frame (a #999999
// rectangle of plot_width x plot_height, drawn last so nothing covers it).

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvtier::experiment {

/// Distinct colours, in the order series take them.
inline constexpr std::array<const char*, 8> palette{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};
/// The plot area's frame, in pixels.
inline constexpr double plot_width = 560, plot_height = 280;
/// Limits (capacities, link rates) are drawn dashed in this colour.
inline constexpr const char* limit_colour = "#000000";

struct plot_series {
  std::string name;
  std::string colour;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
};

struct line_chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<plot_series> lines;
  std::optional<double> y_limit;                    // a horizontal limit line
  std::vector<std::string> x_categories;            // non-empty: x is 0..n-1, ticks are these names
  std::optional<std::pair<double, double>> y_fixed; // the y axis' ends instead of the data's
};

struct bar {
  std::string name;
  double value = 0;
  std::optional<double> bound; // drawn as a dashed mark over the bar (Belady's bound)
};

struct bar_chart {
  std::string title;
  std::string y_label;
  std::vector<bar> bars;
};

/// lo..hi widened to round numbers (1, 2, 2.5 or 5 times a power of ten).
std::pair<double, double> nice_range(double lo, double hi);

std::string svg_line_chart(const line_chart& chart);
std::string svg_bar_chart(const bar_chart& chart);

/// Text made safe for HTML and SVG.
std::string escaped(const std::string& text);

} // namespace kvtier::experiment
