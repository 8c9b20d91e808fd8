// The report's plots for a hand-made result set: exact SVG content (how many
// lines and bars, how many points each, the axes' ranges), no browser.

#include "experiment/html_report.hpp"
#include "experiment/svg_plot.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace kvtier::experiment {
namespace {

using json = nlohmann::json;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// The plot titled `title`: its <g class="plot" ...> element's attributes.
std::string plot_head(const std::string& html, const std::string& title) {
  auto at = html.find("data-title=\"" + title + "\"");
  if (at == std::string::npos)
    return "";
  return html.substr(at, html.find('>', at) - at);
}

json timed_point(uint32_t index, const std::string& capacity, double hit, std::vector<double> ttft) {
  json series{{"bin_seconds", 10.0},
              {"hbm_occupancy", {0.5, 1.0}},
              {"dram_occupancy", {0.0, 0.0}},
              {"pcie_h2d_gbps", {20.0, 45.0}},
              {"pcie_d2h_gbps", {0.0, 0.0}},
              {"nvme_read_gbps", {0.0, 0.0}},
              {"nvme_write_gbps", {0.0, 0.0}},
              {"limits_gbps", {{"pcie_h2d", 50.4}, {"pcie_d2h", 50.4}, {"nvme_read", 7.0}, {"nvme_write", 4.0}}}};
  json result{{"requests_completed", 3},
              {"ttft_ms", {{"p50", ttft[1]}, {"p90", ttft[2]}, {"p99", ttft[2]}}},
              {"tpot_ms", {{"p50", 12.0}, {"p90", 20.0}, {"p99", 30.0}}},
              {"tokens_per_second", 1000.0 * (index + 1)},
              {"max_batch", 4 * (index + 1)},
              {"prefix_hit_ratio", hit},
              {"ttft_quantiles_ms", ttft},
              {"tpot_quantiles_ms", {12.0, 20.0, 30.0}},
              {"series", series}};
  return {{"index", index},
          {"label", "capacity=" + capacity},
          {"values", {{"tiers.hbm.capacity", capacity}}},
          {"seed", nullptr},
          {"ok", true},
          {"result", result}};
}

json hand_made_results() {
  json failed{{"index", 2},
              {"label", "capacity=1GB"},
              {"values", {{"tiers.hbm.capacity", "1GB"}}},
              {"seed", nullptr},
              {"ok", false},
              {"error", "the simulated clock reached its limit"}};
  return {{"experiment", "hand"},
          {"title", "Hand <made>"},
          {"question", "q"},
          {"mode", "timed"},
          {"axes", {{{"key", "tiers.hbm.capacity"}, {"values", {"4GB", "8GB", "1GB"}}}}},
          {"report_x", ""},
          {"points",
           {timed_point(0, "4GB", 0.25, {10.0, 20.0, 40.0}), timed_point(1, "8GB", 0.5, {5.0, 30.0, 80.0}), failed}}};
}

TEST(report_svg, nice_ranges) {
  EXPECT_EQ(nice_range(0, 0.87), (std::pair{0.0, 1.0}));
  EXPECT_EQ(nice_range(0, 80), (std::pair{0.0, 80.0}));
  EXPECT_EQ(nice_range(0, 37), (std::pair{0.0, 40.0}));
  EXPECT_EQ(nice_range(0, 15), (std::pair{0.0, 15.0}));
  EXPECT_EQ(nice_range(3, 3), (std::pair{1.0, 5.0}));
}

TEST(report_svg, a_timed_result_set_draws_exactly_its_points) {
  auto html = html_report(hand_made_results());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg")); // no link but the SVG namespace
  EXPECT_NE(html.find("<title>Hand &lt;made&gt;</title>"), std::string::npos);
  // Plots: 2 CDFs, HBM occupancy, PCIe H2D (the only link that moved bytes),
  // hit ratio along the swept key, 5 comparison bars.
  EXPECT_EQ(count(html, "<g class=\"plot\""), 10u);
  EXPECT_EQ(plot_head(html, "TTFT CDF"), "data-title=\"TTFT CDF\" data-x-range=\"0 80\" data-y-range=\"0 1\"");
  EXPECT_EQ(plot_head(html, "TPOT CDF"), "data-title=\"TPOT CDF\" data-x-range=\"0 30\" data-y-range=\"0 1\"");
  EXPECT_EQ(plot_head(html, "HBM occupancy over time"),
            "data-title=\"HBM occupancy over time\" data-x-range=\"0 15\" data-y-range=\"0 1\"");
  EXPECT_EQ(plot_head(html, "pcie_h2d GB/s over time"),
            "data-title=\"pcie_h2d GB/s over time\" data-x-range=\"0 15\" data-y-range=\"0 60\"");
  EXPECT_EQ(plot_head(html, "pcie_d2h GB/s over time"), "");
  EXPECT_EQ(plot_head(html, "prefix hit ratio along tiers.hbm.capacity"),
            "data-title=\"prefix hit ratio along tiers.hbm.capacity\" data-x-range=\"-0.5 2.5\" data-y-range=\"0 1\"");
  EXPECT_EQ(plot_head(html, "tokens per second"),
            "data-title=\"tokens per second\" data-x-range=\"-0.5 1.5\" data-y-range=\"0 2000\"");
  // Lines: 2 per CDF, 2 per series over time, 1 hit-ratio line of 2 points.
  EXPECT_EQ(count(html, "<polyline class=\"series\""), 9u);
  EXPECT_EQ(count(html, "data-points=\"3\""), 4u);
  EXPECT_EQ(count(html, "data-points=\"2\""), 5u);
  EXPECT_EQ(count(html, "<rect class=\"bar\""), 10u);
  EXPECT_EQ(count(html, "<line class=\"limit\""), 2u);
  // The first TTFT line's points: x = 64 + ms/80 * 560, y = 32 + (1 - share) * 280.
  EXPECT_NE(html.find("data-name=\"capacity=4GB\" data-points=\"3\" points=\"134.0,312.0 204.0,172.0 344.0,32.0\""),
            std::string::npos);
  // The table: a header and every point, the failed one with its error.
  EXPECT_EQ(count(html, "<tr>"), 4u);
  EXPECT_NE(html.find("<td class=\"error\" colspan=\"19\">the simulated clock reached its limit</td>"),
            std::string::npos);
}

TEST(report_svg, a_key_with_repeated_values_plots_the_points_in_order) {
  auto results = hand_made_results();
  results["axes"][0]["values"] = {"4GB", "4GB", "1GB"}; // a zip's key may repeat a value
  auto html = html_report(results);
  EXPECT_EQ(plot_head(html, "prefix hit ratio by point"),
            "data-title=\"prefix hit ratio by point\" data-x-range=\"-0.5 1.5\" data-y-range=\"0 1\"");
  EXPECT_NE(html.find("data-name=\"hit ratio\" data-points=\"2\" points=\"204.0,242.0 484.0,172.0\""),
            std::string::npos);
}

TEST(report_svg, cache_only_results_carry_the_belady_bound) {
  json points = json::array();
  for (uint32_t i = 0; i < 4; ++i) {
    std::string cap = i % 2 ? "8GB" : "4GB";
    std::string policy = i < 2 ? "lru" : "arc";
    points.push_back({{"index", i},
                      {"label", policy + " " + cap},
                      {"values", {{"tiers.hbm.capacity", cap}, {"cache.policy", policy}}},
                      {"seed", nullptr},
                      {"ok", true},
                      {"result",
                       {{"requests_total", 100},
                        {"prefix_hit_ratio", 0.1 * (i + 1)},
                        {"belady_hit_ratio", 0.6 + 0.1 * (i % 2)},
                        {"lru_hit_ratio", 0.1}}}});
  }
  json results{{"experiment", "c"},
               {"title", ""},
               {"question", ""},
               {"mode", "cache-only"},
               {"axes",
                {{{"key", "cache.policy"}, {"values", {"lru", "arc"}}},
                 {{"key", "tiers.hbm.capacity"}, {"values", {"4GB", "8GB"}}}}},
               {"report_x", "tiers.hbm.capacity"},
               {"points", points}};
  auto html = html_report(results);
  EXPECT_EQ(html.find("CDF"), std::string::npos);
  EXPECT_EQ(count(html, "<g class=\"plot\""), 2u);
  // A line per policy and its Belady line, two sizes each.
  EXPECT_EQ(count(html, "<polyline class=\"series\""), 4u);
  EXPECT_EQ(count(html, "data-name=\"policy=arc (Belady)\" data-points=\"2\""), 1u);
  EXPECT_EQ(count(html, "stroke-dasharray=\"8 4\""), 2u);
  EXPECT_EQ(count(html, "<rect class=\"bar\""), 4u);
  EXPECT_EQ(count(html, "<line class=\"bound\""), 4u);
  EXPECT_NE(html.find(">4GB</text>"), std::string::npos);
}

} // namespace
} // namespace kvtier::experiment
