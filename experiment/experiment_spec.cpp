// load_experiment / config_of_point: the experiment file's tables, the sweep
// expanded into points, and each point's config assembled from the parsed
// files by moving their nodes, so every value keeps the file and line it was
// written at and config_of_table's errors point there.

#include "experiment/experiment_spec.hpp"

#include "runtime/config_table.hpp"
#include "runtime/error.hpp"
#include "runtime/toml_reader.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>
#include <xxhash.h>

#include <algorithm>
#include <sstream>
#include <tuple>

namespace kvtier::experiment {
namespace {

// Sweeps larger than this are almost surely a mistake (a cartesian product of long lists).
constexpr size_t max_points = 10'000;

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    auto dot = key.find('.', start);
    parts.emplace_back(key.substr(start, dot - start));
    if (dot == std::string_view::npos)
      return parts;
    start = dot + 1;
  }
}

std::string text_of(const toml::node& node) {
  if (auto s = node.as_string())
    return s->get();
  if (auto i = node.as_integer())
    return std::to_string(i->get());
  if (auto f = node.as_floating_point())
    return fmt::format("{}", f->get());
  if (auto b = node.as_boolean())
    return b->get() ? "true" : "false";
  return node.is_table() ? "a table" : "a list";
}

std::string located(const toml::node& node, const std::string& file) {
  const auto& at = node.source().begin;
  return at.line ? fmt::format("{}:{}:{}", file, at.line, at.column) : file;
}

caf::error fail_at(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_config, fmt::format("{}: {}", where, what));
}

// [sweep]'s axes, nested tables flattened into dotted keys.
caf::error read_axes(const toml::table& table, const std::string& prefix, const std::string& file,
                     std::vector<sweep_axis>& axes) {
  static const std::vector<std::string_view> reserved{"combine", "seeds", "seed_key", "labels", "zip"};
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (prefix.empty() && std::find(reserved.begin(), reserved.end(), k.str()) != reserved.end())
      continue;
    if (auto sub = node.as_table()) {
      if (auto err = read_axes(*sub, key, file, axes))
        return err;
      continue;
    }
    auto list = node.as_array();
    if (!list || list->empty())
      return fail_at(located(node, file),
                     fmt::format("[sweep] {}: expected a non-empty list of the values to sweep, got {}", key,
                                 list ? "[]" : text_of(node)));
    sweep_axis axis{key, {}, located(node, file), node.source().begin.line, node.source().begin.column};
    for (const auto& v : *list) {
      if (v.is_table() || v.is_array())
        return fail_at(located(v, file), fmt::format("[sweep] {}: expected a value (string, number or boolean)", key));
      axis.values.push_back(text_of(v));
    }
    axes.push_back(std::move(axis));
  }
  return {};
}

const toml::node* sweep_value(const toml::table& sweep, std::string_view key, size_t i) {
  if (auto direct = sweep.get_as<toml::array>(key))
    return direct->get(i);
  auto dot = key.find('.');
  if (dot == std::string_view::npos)
    return nullptr;
  auto sub = sweep.get_as<toml::table>(key.substr(0, dot));
  return sub ? sweep_value(*sub, key.substr(dot + 1), i) : nullptr;
}

// Moves every node of `from` into `into`; tables merge, other values replace.
void merge(toml::table& into, toml::table&& from) {
  for (auto&& [k, node] : from) {
    auto mine = into.get_as<toml::table>(k.str());
    if (mine && node.is_table())
      merge(*mine, std::move(*node.as_table()));
    else
      into.insert_or_assign(k, std::move(node));
  }
}

// Sets `value` at the dotted `key`, making tables on the way.
caf::error set_at(toml::table& root, const std::string& key, toml::node&& value, const std::string& where) {
  auto parts = split_key(key);
  toml::table* table = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto* next = table->get(parts[i]);
    if (!next)
      next = table->insert(parts[i], toml::table{}).first->second.as_table();
    if (!next->is_table())
      return fail_at(where, fmt::format("[sweep] {}: {} is a value in the config, not a table", key, parts[i]));
    table = next->as_table();
  }
  table->insert_or_assign(parts.back(), std::move(value));
  return {};
}

struct point_table {
  toml::table table;
  std::string name; // the name config_of_table gives the config
};

caf::expected<point_table> table_of_point(const experiment_spec& spec, const sweep_point& point) {
  point_table out;
  out.name = spec.base_path.empty() ? spec.path : spec.base_path;
  if (!spec.base_path.empty()) {
    auto base = parse_toml_file(spec.base_path, "base config");
    if (!base)
      return std::move(base.error());
    out.table = std::move(*base);
  }
  auto parsed = parse_toml_file(spec.path, "experiment file");
  if (!parsed)
    return std::move(parsed.error());
  if (auto inline_base = parsed->get_as<toml::table>("base"))
    merge(out.table, std::move(*inline_base));
  // No [sweep] means no axes: the point is the base alone.
  const toml::table* sweep = parsed->get_as<toml::table>("sweep");
  for (size_t a = 0; a < spec.axes.size() && sweep; ++a) {
    const auto& axis = spec.axes[a];
    size_t pick = 0;
    while (axis.values[pick] != point.values[a].second)
      ++pick;
    auto node = const_cast<toml::node*>(sweep_value(*sweep, axis.key, pick));
    if (auto err = set_at(out.table, axis.key, std::move(*node), axis.where))
      return err;
  }
  if (point.seed)
    if (auto err = set_at(out.table, spec.seed_key, toml::value<int64_t>(*point.seed), spec.path))
      return err;
  return out;
}

std::string fingerprint_of(const experiment_spec& spec, const toml::table& table) {
  std::ostringstream text;
  text << (spec.mode == run_mode::timed ? "timed\n" : "cache-only\n");
  // Before [cluster] points ran the cluster they ran one node: their records must not be reused.
  if (table.contains("cluster"))
    text << "cluster points run the cluster\n";
  text << table;
  auto s = text.str();
  return fmt::format("{:016x}", XXH3_64bits(s.data(), s.size()));
}

// A key's last part when no other swept key ends the same, else the whole key.
std::string short_key(const std::string& key, const std::vector<sweep_axis>& axes) {
  auto last = key.substr(key.rfind('.') + 1);
  for (const auto& a : axes)
    if (a.key != key && a.key.substr(a.key.rfind('.') + 1) == last)
      return key;
  return last;
}

std::string label_of(const sweep_point& p, const std::vector<sweep_axis>& axes) {
  std::string out;
  for (const auto& [k, v] : p.values)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", short_key(k, axes), v);
  if (p.seed)
    out += fmt::format("{}seed={}", out.empty() ? "" : " ", *p.seed);
  return out;
}

// Axes that move together: every axis under combine = "zip"; else the lists
// of [sweep] zip, each other axis alone. Groups are ordered by their first axis.
caf::expected<std::vector<std::vector<size_t>>> groups_of(const experiment_spec& spec,
                                                          const std::vector<std::vector<std::string>>& zipped,
                                                          const std::string& zip_where) {
  std::vector<std::vector<size_t>> groups;
  std::vector<int> group_of(spec.axes.size(), -1);
  auto axis_index = [&](const std::string& key) -> std::optional<size_t> {
    for (size_t a = 0; a < spec.axes.size(); ++a)
      if (spec.axes[a].key == key)
        return a;
    return std::nullopt;
  };
  if (spec.combine == combine_mode::zip) {
    groups.emplace_back();
    for (size_t a = 0; a < spec.axes.size(); ++a)
      groups.back().push_back(a);
  } else {
    std::vector<std::vector<size_t>> together;
    for (const auto& keys : zipped) {
      together.emplace_back();
      for (const auto& key : keys) {
        auto a = axis_index(key);
        if (!a || group_of[*a] >= 0)
          return fail_at(zip_where,
                         fmt::format("[sweep] zip: \"{}\" is {}", key, a ? "in two zip lists" : "not a swept key"));
        group_of[*a] = static_cast<int>(together.size() - 1);
        together.back().push_back(*a);
      }
    }
    std::vector<bool> placed(together.size());
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      if (group_of[a] < 0)
        groups.push_back({a});
      else if (!placed[static_cast<size_t>(group_of[a])]) {
        placed[static_cast<size_t>(group_of[a])] = true;
        groups.push_back(together[static_cast<size_t>(group_of[a])]);
      }
    }
  }
  for (const auto& g : groups)
    for (size_t a : g)
      if (spec.axes[a].values.size() != spec.axes[g.front()].values.size())
        return fail_at(spec.axes[a].where,
                       fmt::format("[sweep] {}: zipped with {}, expected {} values, got {}", spec.axes[a].key,
                                   spec.axes[g.front()].key, spec.axes[g.front()].values.size(),
                                   spec.axes[a].values.size()));
  return groups;
}

caf::error expand(experiment_spec& spec, const std::vector<std::string>& labels,
                  const std::vector<std::vector<std::string>>& zipped, const std::string& sweep_where,
                  const std::string& zip_where) {
  auto groups = groups_of(spec, zipped, zip_where);
  if (!groups)
    return std::move(groups.error());
  size_t total = 1;
  for (const auto& g : *groups) {
    total *= spec.axes[g.front()].values.size();
    if (total > max_points)
      return fail_at(sweep_where,
                     fmt::format("[sweep]: more than {} points; at most {} expected", max_points, max_points));
  }
  // The first group varies slowest.
  std::vector<std::vector<size_t>> picks;
  for (size_t n = 0; n < total; ++n) {
    std::vector<size_t> pick(spec.axes.size());
    size_t rest = n;
    for (size_t g = groups->size(); g-- > 0;) {
      size_t count = spec.axes[(*groups)[g].front()].values.size();
      for (size_t a : (*groups)[g])
        pick[a] = rest % count;
      rest /= count;
    }
    picks.push_back(std::move(pick));
  }
  if (!labels.empty() && labels.size() != picks.size())
    return fail_at(
        sweep_where,
        fmt::format("[sweep] labels: expected one label per point ({}), got {}", picks.size(), labels.size()));
  std::vector<std::optional<int64_t>> seeds(spec.seeds.begin(), spec.seeds.end());
  if (seeds.empty())
    seeds.emplace_back();
  for (size_t i = 0; i < picks.size(); ++i)
    for (const auto& seed : seeds) {
      sweep_point p;
      p.index = static_cast<uint32_t>(spec.points.size());
      for (size_t a = 0; a < spec.axes.size(); ++a)
        p.values.emplace_back(spec.axes[a].key, spec.axes[a].values[picks[i][a]]);
      p.seed = seed;
      p.label = labels.empty() ? label_of(p, spec.axes) : labels[i] + (seed ? fmt::format(" seed={}", *seed) : "");
      spec.points.push_back(std::move(p));
    }
  if (spec.points.size() > max_points)
    return fail_at(sweep_where, fmt::format("[sweep]: {} points; at most {} expected", spec.points.size(), max_points));
  return {};
}

std::string stem_of(const std::string& path) {
  auto slash = path.rfind('/');
  auto name = slash == std::string::npos ? path : path.substr(slash + 1);
  auto dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

} // namespace

caf::expected<experiment_spec> load_experiment(const std::string& path) {
  auto parsed = parse_toml_file(path, "experiment file");
  if (!parsed)
    return std::move(parsed.error());
  experiment_spec spec;
  spec.path = path;
  spec.name = stem_of(path);
  toml_reader top(*parsed, path, "");
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> zipped;
  std::string sweep_where = path;
  std::string zip_where = path;
  if (auto t = top.sub_table("experiment")) {
    toml_reader r(*t, path, "experiment");
    r.read("title", spec.title);
    r.read("question", spec.question);
    r.read("base", spec.base_path);
    std::string mode = "timed";
    r.read_choice("mode", mode, {"timed", "cache-only"});
    spec.mode = mode == "timed" ? run_mode::timed : run_mode::cache_only;
    if (auto err = r.finish({"title", "question", "base", "mode"}))
      return err;
    if (!spec.base_path.empty() && spec.base_path.front() != '/') {
      auto slash = path.rfind('/');
      if (slash != std::string::npos)
        spec.base_path = path.substr(0, slash + 1) + spec.base_path;
    }
  }
  if (!top.sub_table("base") && top.has("base"))
    return top.error();
  if (auto sweep = top.sub_table("sweep")) {
    sweep_where = located(*sweep, path);
    toml_reader r(*sweep, path, "sweep");
    std::string combine = "cartesian";
    r.read_choice("combine", combine, {"cartesian", "zip"});
    spec.combine = combine == "zip" ? combine_mode::zip : combine_mode::cartesian;
    r.read("seed_key", spec.seed_key);
    if (auto seeds = sweep->get("seeds")) {
      auto list = seeds->as_array();
      if (!list || list->empty())
        return fail_at(located(*seeds, path), "[sweep] seeds: expected a non-empty list of integers");
      for (const auto& s : *list) {
        if (!s.is_integer())
          return fail_at(located(s, path), fmt::format("[sweep] seeds: expected an integer, got {}", text_of(s)));
        spec.seeds.push_back(s.as_integer()->get());
      }
    }
    if (auto zip = sweep->get("zip")) {
      zip_where = located(*zip, path);
      auto lists = zip->as_array();
      bool ok = lists != nullptr;
      for (size_t i = 0; ok && i < lists->size(); ++i) {
        auto keys = lists->get(i)->as_array();
        ok = keys && keys->size() >= 2;
        zipped.emplace_back();
        for (size_t k = 0; ok && k < keys->size(); ++k) {
          ok = keys->get(k)->is_string();
          if (ok)
            zipped.back().push_back(keys->get(k)->as_string()->get());
        }
      }
      if (!ok)
        return fail_at(zip_where, "[sweep] zip: expected lists of two or more swept keys, e.g. [[\"a.b\", \"c.d\"]]");
      if (!zipped.empty() && combine == "zip")
        return fail_at(zip_where, "[sweep] zip: combine = \"zip\" already zips every key");
    }
    if (auto list = sweep->get("labels")) {
      if (!list->is_array())
        return fail_at(located(*list, path), "[sweep] labels: expected a list of strings");
      for (const auto& l : *list->as_array())
        labels.push_back(text_of(l));
    }
    if (!r.ok())
      return r.error();
    if (auto err = read_axes(*sweep, "", path, spec.axes))
      return err;
    // TOML tables are sorted by key; the file's order is the user's.
    std::stable_sort(spec.axes.begin(), spec.axes.end(), [](const auto& a, const auto& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
  }
  if (auto t = top.sub_table("report")) {
    toml_reader r(*t, path, "report");
    r.read("x", spec.report_x);
    if (auto err = r.finish({"x"}))
      return err;
  }
  if (auto err = top.finish({"experiment", "base", "sweep", "report"}))
    return err;
  if (!spec.report_x.empty() &&
      std::none_of(spec.axes.begin(), spec.axes.end(), [&](const auto& a) { return a.key == spec.report_x; }))
    return fail_at(located(*parsed->at_path("report.x").node(), path),
                   fmt::format("[report] x: expected one of the swept keys, got \"{}\"", spec.report_x));
  if (auto err = expand(spec, labels, zipped, sweep_where, zip_where))
    return err;
  // Every point's config is checked now: a sweep fails before its first run.
  for (auto& p : spec.points) {
    auto table = table_of_point(spec, p);
    if (!table)
      return std::move(table.error());
    p.fingerprint = fingerprint_of(spec, table->table);
    auto cfg = config_of_table(table->table, table->name);
    if (!cfg)
      return make_error(errc::invalid_config,
                        fmt::format("{}\n  (in the sweep's point {}: {})", describe(cfg.error()), p.index, p.label));
  }
  return spec;
}

caf::expected<config> config_of_point(const experiment_spec& spec, const sweep_point& point) {
  auto table = table_of_point(spec, point);
  if (!table)
    return std::move(table.error());
  return config_of_table(table->table, table->name);
}

} // namespace kvtier::experiment
