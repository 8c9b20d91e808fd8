#include "runtime/toml_reader.hpp"

#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <toml++/toml.h>

namespace kvtier {

toml_reader::toml_reader(const toml::table& table, std::string file, std::string table_name)
    : table_(table), file_(std::move(file)), table_name_(std::move(table_name)) {
}

std::string toml_reader::where(const toml::source_region& region) const {
  if (region.begin.line == 0)
    return file_;
  // A table assembled from several files (an experiment's base config and its
  // sweep) keeps each node's own file.
  return fmt::format("{}:{}:{}", region.path ? *region.path : file_, region.begin.line, region.begin.column);
}

void toml_reader::fail(std::string_view key, const std::string& what) {
  if (error_)
    return;
  const toml::node* node = key.empty() ? nullptr : table_.get(key);
  auto location = where(node ? node->source() : table_.source());
  std::string scope = table_name_.empty() ? "" : fmt::format("[{}] ", table_name_);
  error_ = make_error(errc::invalid_config, fmt::format("{}: {}{}: {}", location, scope, key, what));
}

std::string toml_reader::file_of(std::string_view key) const {
  const toml::node* node = table_.get(key);
  return node && node->source().path ? *node->source().path : file_;
}

const toml::node* toml_reader::lookup(std::string_view key) {
  known_.insert(std::string(key));
  if (error_)
    return nullptr;
  return table_.get(key);
}

namespace {
std::string describe_node(const toml::node& node) {
  if (auto s = node.value<std::string>())
    return fmt::format("the string \"{}\"", *s);
  if (auto i = node.as_integer())
    return fmt::format("the integer {}", i->get());
  if (auto f = node.as_floating_point())
    return fmt::format("the number {}", f->get());
  if (auto b = node.as_boolean())
    return fmt::format("the boolean {}", b->get());
  if (node.is_table())
    return "a table";
  if (node.is_array())
    return "an array";
  return "a date/time";
}
} // namespace

void toml_reader::read(std::string_view key, std::string& out) {
  if (auto node = lookup(key)) {
    if (auto v = node->value<std::string>())
      out = *v;
    else
      fail(key, fmt::format("expected a string, got {}", describe_node(*node)));
  }
}

void toml_reader::read(std::string_view key, bool& out) {
  if (auto node = lookup(key)) {
    if (auto v = node->as_boolean())
      out = v->get();
    else
      fail(key, fmt::format("expected true or false, got {}", describe_node(*node)));
  }
}

void toml_reader::read(std::string_view key, double& out, double min, double max) {
  if (auto node = lookup(key)) {
    std::optional<double> v;
    if (auto f = node->as_floating_point())
      v = f->get();
    else if (auto i = node->as_integer())
      v = static_cast<double>(i->get());
    if (!v)
      return fail(key, fmt::format("expected a number in {}..{}, got {}", min, max, describe_node(*node)));
    if (auto problem = number_problem(*v, {min, max}))
      return fail(key, *problem);
    out = *v;
  }
}

void toml_reader::read(std::string_view key, std::vector<double>& out, double min, double max) {
  if (auto node = lookup(key)) {
    auto array = node->as_array();
    if (!array)
      return fail(key, fmt::format("expected an array of numbers in {}..{}, got {}", min, max, describe_node(*node)));
    std::vector<double> values;
    for (size_t i = 0; i < array->size(); ++i) {
      const auto& item = *array->get(i);
      std::optional<double> v;
      if (auto f = item.as_floating_point())
        v = f->get();
      else if (auto n = item.as_integer())
        v = static_cast<double>(n->get());
      if (!v)
        return fail(key, fmt::format("item {}: expected a number in {}..{}, got {}", i, min, max, describe_node(item)));
      if (auto problem = number_problem(*v, {min, max}))
        return fail(key, fmt::format("item {}: {}", i, *problem));
      values.push_back(*v);
    }
    out = std::move(values);
  }
}

void toml_reader::read(std::string_view key, uint64_t& out, uint64_t min, uint64_t max) {
  if (auto node = lookup(key)) {
    auto i = node->as_integer();
    if (!i)
      return fail(key, fmt::format("expected an integer in {}..{}, got {}", min, max, describe_node(*node)));
    auto v = i->get();
    if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max)
      return fail(key, fmt::format("expected an integer in {}..{}, got {}", min, max, v));
    out = static_cast<uint64_t>(v);
  }
}

void toml_reader::read(std::string_view key, uint32_t& out, uint32_t min, uint32_t max) {
  uint64_t wide = out;
  read(key, wide, min, max);
  out = static_cast<uint32_t>(wide);
}

void toml_reader::read_bytes(std::string_view key, uint64_t& out, uint64_t min, uint64_t max) {
  auto node = lookup(key);
  if (!node)
    return;
  uint64_t value = 0;
  if (auto i = node->as_integer(); i && i->get() >= 0) {
    value = static_cast<uint64_t>(i->get());
  } else if (auto s = node->value<std::string>()) {
    auto parsed = parse_bytes(*s);
    if (!parsed) {
      // A number with a bad unit or too large for 64 bits: the parser's own words say which.
      if (!s->empty() && std::isdigit(static_cast<unsigned char>(s->front())))
        return fail(key, describe(parsed.error()));
      return fail(key, fmt::format("expected a size such as \"64GiB\" or \"141GB\", got \"{}\"", *s));
    }
    value = *parsed;
  } else {
    return fail(key,
                fmt::format("expected a size (bytes or a string such as \"64GiB\"), got {}", describe_node(*node)));
  }
  if (auto problem = size_problem(value, {min, max}))
    return fail(key, *problem);
  out = value;
}

void toml_reader::read_choice(std::string_view key, std::string& out, const std::vector<std::string_view>& choices) {
  std::string value = out;
  read(key, value);
  if (error_ || !table_.contains(key))
    return;
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) {
    out = value;
    return;
  }
  std::string list;
  for (auto c : choices)
    list += (list.empty() ? "" : ", ") + std::string(c);
  auto hint = closest_match(value, choices);
  fail(key,
       fmt::format("expected one of {}, got \"{}\"{}", list, value,
                   hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
}

const toml::table* toml_reader::sub_table(std::string_view key) {
  auto node = lookup(key);
  if (!node)
    return nullptr;
  if (auto t = node->as_table())
    return t;
  fail(key, fmt::format("expected a table, got {}", describe_node(*node)));
  return nullptr;
}

caf::error toml_reader::finish(const std::vector<std::string_view>& allowed) {
  if (error_)
    return error_;
  for (const auto& [key, node] : table_) {
    std::string_view name = key.str();
    bool is_allowed = std::find(allowed.begin(), allowed.end(), name) != allowed.end();
    if (is_allowed)
      continue;
    auto hint = closest_match(name, allowed);
    std::string list;
    for (auto a : allowed)
      list += (list.empty() ? "" : ", ") + std::string(a);
    std::string scope = table_name_.empty() ? "" : fmt::format("[{}] ", table_name_);
    error_ = make_error(errc::invalid_config,
                        fmt::format("{}: {}unknown key '{}'{}; known keys: {}", where(node.source()), scope, name,
                                    hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), list));
    return error_;
  }
  return {};
}

std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
      row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = 4;
  for (auto c : candidates) {
    auto d = distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

caf::expected<toml::table> parse_toml(std::string_view text, const std::string& file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return make_error(errc::invalid_config,
                      fmt::format("{}:{}:{}: TOML syntax error: {}", file, at.line, at.column, e.description()));
  }
}

caf::expected<toml::table> parse_toml_file(const std::string& path, std::string_view what) {
  auto text = read_text_file(path, what);
  if (!text)
    return std::move(text.error());
  return parse_toml(*text, path);
}

} // namespace kvtier
