#include "experiment/html_report.hpp"

#include "experiment/experiment_spec.hpp"
#include "experiment/results.hpp"
#include "experiment/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace kvtier::experiment {
namespace {

using json = nlohmann::json;

const char* colour_of(size_t i) {
  return palette[i % palette.size()];
}

double number_at(const json& result, const char* pointer) {
  json::json_pointer p(pointer);
  return result.contains(p) && result.at(p).is_number() ? result.at(p).get<double>() : 0.0;
}

std::vector<const json*> ok_points(const json& results) {
  std::vector<const json*> out;
  for (const auto& p : results["points"])
    if (p["ok"].get<bool>())
      out.push_back(&p);
  return out;
}

std::string cdf(const std::vector<const json*>& points, const char* field, const std::string& title) {
  line_chart c{title, "ms", "share of requests", {}, std::nullopt, {}, std::pair{0.0, 1.0}};
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& q = (*points[i])["result"][field];
    plot_series s{(*points[i])["label"].get<std::string>(), colour_of(i), {}};
    for (size_t k = 0; k < q.size(); ++k)
      s.points.emplace_back(q[k].get<double>(), double(k) / double(q.size() - 1));
    if (!s.points.empty())
      c.lines.push_back(std::move(s));
  }
  return c.lines.empty() ? "" : svg_line_chart(c);
}

std::string along_x(const json& results, const std::vector<const json*>& points, bool cache_only) {
  const auto& axes = results["axes"];
  if (axes.empty())
    return "";
  std::string x_key = results["report_x"].get<std::string>();
  if (x_key.empty())
    x_key = axes[0]["key"].get<std::string>();
  std::vector<std::string> categories;
  for (const auto& a : axes)
    if (a["key"] == x_key)
      categories = a["values"].get<std::vector<std::string>>();
  // A key whose values repeat (a zip such as dtype = [bf16, fp8, bf16]) cannot
  // be an axis: the points themselves are, in sweep order, as one line.
  auto sorted = categories;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    line_chart c{"prefix hit ratio by point", "point", "hit ratio", {}, std::nullopt, {}, std::pair{0.0, 1.0}};
    plot_series line{"hit ratio", colour_of(0), {}};
    plot_series bound{"Belady", colour_of(0), {}, true};
    for (const auto* p : points) {
      c.x_categories.push_back((*p)["label"].get<std::string>());
      line.points.emplace_back(double(c.x_categories.size() - 1), number_at((*p)["result"], "/prefix_hit_ratio"));
      bound.points.emplace_back(double(c.x_categories.size() - 1), number_at((*p)["result"], "/belady_hit_ratio"));
    }
    c.lines.push_back(std::move(line));
    if (cache_only)
      c.lines.push_back(std::move(bound));
    return svg_line_chart(c);
  }
  // A line per combination of the other keys' values (and seed).
  std::map<std::string, plot_series> groups;
  std::map<std::string, plot_series> bounds;
  std::vector<std::string> order;
  for (const auto* p : points) {
    std::string group;
    for (const auto& [k, v] : (*p)["values"].items())
      if (k != x_key)
        group += fmt::format("{}{}={}", group.empty() ? "" : " ", k.substr(k.rfind('.') + 1), v.get<std::string>());
    if (!(*p)["seed"].is_null())
      group += fmt::format("{}seed={}", group.empty() ? "" : " ", (*p)["seed"].dump());
    if (group.empty())
      group = "hit ratio";
    if (!groups.count(group)) {
      order.push_back(group);
      groups[group] = {group, colour_of(order.size() - 1), {}};
      bounds[group] = {group + " (Belady)", colour_of(order.size() - 1), {}, true};
    }
    auto x =
        std::find(categories.begin(), categories.end(), (*p)["values"][x_key].get<std::string>()) - categories.begin();
    const auto& r = (*p)["result"];
    groups[group].points.emplace_back(double(x), number_at(r, "/prefix_hit_ratio"));
    if (cache_only)
      bounds[group].points.emplace_back(double(x), number_at(r, "/belady_hit_ratio"));
  }
  line_chart c{
      "prefix hit ratio along " + x_key, x_key, "hit ratio", {}, std::nullopt, categories, std::pair{0.0, 1.0}};
  for (const auto& g : order) {
    c.lines.push_back(groups[g]);
    if (cache_only)
      c.lines.push_back(bounds[g]);
  }
  return svg_line_chart(c);
}

std::string over_time(const std::vector<const json*>& points, const char* field, const std::string& title,
                      const std::string& y_label, std::optional<double> limit) {
  line_chart c{title, "simulated s", y_label, {}, limit, {}, std::nullopt};
  bool any = false;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& result = (*points[i])["result"];
    if (!result.contains("series") || !result["series"].contains(field))
      continue; // a cluster point keeps its series per replica
    const auto& s = result["series"];
    double w = s["bin_seconds"].get<double>();
    plot_series line{(*points[i])["label"].get<std::string>(), colour_of(i), {}};
    const auto& v = s[field];
    for (size_t b = 0; b < v.size(); ++b) {
      line.points.emplace_back((double(b) + 0.5) * w, v[b].get<double>());
      any = any || v[b].get<double>() > 0;
    }
    c.lines.push_back(std::move(line));
  }
  return any ? svg_line_chart(c) : "";
}

std::string bars(const std::vector<const json*>& points, const char* pointer, const std::string& title,
                 const std::string& y_label, const char* bound_pointer = nullptr) {
  bar_chart c{title, y_label, {}};
  for (const auto* p : points) {
    bar b{(*p)["label"].get<std::string>(), number_at((*p)["result"], pointer), std::nullopt};
    if (bound_pointer)
      b.bound = number_at((*p)["result"], bound_pointer);
    c.bars.push_back(std::move(b));
  }
  return svg_bar_chart(c);
}

std::string table(const json& results, run_mode mode) {
  const auto& points = results["points"];
  const auto& columns = metric_columns(mode, std::any_of(points.begin(), points.end(), is_cluster_record));
  std::string out = "<table><tr><th>#</th><th>point</th>";
  for (const auto& a : results["axes"])
    out += fmt::format("<th>{}</th>", escaped(a["key"].get<std::string>()));
  out += "<th>seed</th>";
  for (const auto& c : columns)
    out += fmt::format("<th>{}</th>", c.name);
  out += "</tr>\n";
  for (const auto& p : results["points"]) {
    out +=
        fmt::format("<tr><td>{}</td><td>{}</td>", p["index"].get<uint32_t>(), escaped(p["label"].get<std::string>()));
    for (const auto& a : results["axes"])
      out += fmt::format("<td>{}</td>", escaped(p["values"].value(a["key"].get<std::string>(), "")));
    out += fmt::format("<td>{}</td>", p["seed"].is_null() ? "" : p["seed"].dump());
    if (p["ok"].get<bool>()) {
      for (const auto& c : columns)
        out += fmt::format("<td>{}</td>", cell(p["result"], c.pointer));
    } else {
      out += fmt::format("<td class=\"error\" colspan=\"{}\">{}</td>", columns.size(),
                         escaped(p["error"].get<std::string>()));
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string section(const std::string& heading, const std::vector<std::string>& plots) {
  std::string body;
  for (const auto& p : plots)
    if (!p.empty())
      body += "<div class=\"fig\">" + p + "</div>\n";
  return body.empty() ? "" : fmt::format("<h2>{}</h2>\n{}", escaped(heading), body);
}

} // namespace

std::string html_report(const json& results) {
  bool cache_only = results["mode"] == "cache-only";
  auto mode = cache_only ? run_mode::cache_only : run_mode::timed;
  auto points = ok_points(results);
  std::string title = results["title"].get<std::string>();
  if (title.empty())
    title = results["experiment"].get<std::string>();
  std::string out =
      fmt::format("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n<style>"
                  "body{{font-family:sans-serif;margin:24px;max-width:1400px}} .fig{{display:inline-block;margin:4px}} "
                  "table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px;"
                  "text-align:right}} td.error{{color:#b00;text-align:left}}</style></head><body>\n"
                  "<h1>{0}</h1>\n<p>{1}</p>\n<p>{2} points ({3} failed), {4} runs; written by kvtier experiment.</p>\n",
                  escaped(title), escaped(results["question"].get<std::string>()), results["points"].size(),
                  results["points"].size() - points.size(), cache_only ? "cache-only" : "timed");
  if (!cache_only) {
    out += section("Latency",
                   {cdf(points, "ttft_quantiles_ms", "TTFT CDF"), cdf(points, "tpot_quantiles_ms", "TPOT CDF")});
    std::vector<std::string> series{
        over_time(points, "hbm_occupancy", "HBM occupancy over time", "share of HBM blocks", 1.0)};
    static constexpr std::array<std::pair<const char*, const char*>, 4> links{{{"pcie_h2d_gbps", "pcie_h2d"},
                                                                               {"pcie_d2h_gbps", "pcie_d2h"},
                                                                               {"nvme_read_gbps", "nvme_read"},
                                                                               {"nvme_write_gbps", "nvme_write"}}};
    for (auto [field, name] : links) {
      std::optional<double> limit;
      if (!points.empty())
        limit = number_at((*points[0])["result"], fmt::format("/series/limits_gbps/{}", name).c_str());
      series.push_back(over_time(points, field, fmt::format("{} GB/s over time", name), "GB/s", limit));
    }
    out += section("Occupancy and links over time (dashed: the limit)", series);
  }
  out += section(cache_only ? "Hit ratio (dashed: Belady's bound for the same memory)" : "Hit ratio",
                 {along_x(results, points, cache_only)});
  if (cache_only)
    out += section(
        "Comparison",
        {bars(points, "/prefix_hit_ratio", "prefix hit ratio (dashed: Belady)", "hit ratio", "/belady_hit_ratio")});
  else if (std::any_of(points.begin(), points.end(), [](const json* p) { return is_cluster_record(*p); }))
    // A cluster's batches and tokens are per replica; what it adds is the remote tier and the network.
    out += section("Comparison",
                   {bars(points, "/generated_tokens_per_second", "generated tokens per second", "tokens/s"),
                    bars(points, "/tpot_ms/p50", "TPOT p50", "ms"), bars(points, "/ttft_ms/p50", "TTFT p50", "ms"),
                    bars(points, "/prefix_hit_ratio", "prefix hit ratio", "hit ratio"),
                    bars(points, "/prefix_hits_by_tier/remote", "hits from the remote tier", "share of blocks"),
                    bars(points, "/network/gbps", "network", "GB/s")});
  else
    out += section("Comparison",
                   {bars(points, "/max_batch", "concurrent sequences (peak batch)", "sequences"),
                    bars(points, "/tokens_per_second", "tokens per second", "tokens/s"),
                    bars(points, "/tpot_ms/p50", "TPOT p50", "ms"), bars(points, "/ttft_ms/p50", "TTFT p50", "ms"),
                    bars(points, "/prefix_hit_ratio", "prefix hit ratio", "hit ratio")});
  out += "<h2>Every point</h2>\n" + table(results, mode);
  return out + "</body></html>\n";
}

} // namespace kvtier::experiment
