#pragma once
// Reads one TOML table into plain values, with errors that say where and what.
//
// Every key read is remembered; finish() reports the first key nobody read
// as unknown, with the closest known key as a suggestion. Every error names
// "file:line:column: [table] key: expected ..., got ...".

#include "runtime/value_check.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier {

class toml_reader {
public:
  toml_reader(const toml::table& table, std::string file, std::string table_name);

  /// First error met, if any; later reads are skipped once one occurred.
  const caf::error& error() const { return error_; }
  bool ok() const { return !error_; }

  void read(std::string_view key, std::string& out);
  void read(std::string_view key, bool& out);
  void read(std::string_view key, double& out, double min, double max);
  void read(std::string_view key, uint64_t& out, uint64_t min, uint64_t max);
  void read(std::string_view key, uint32_t& out, uint32_t min, uint32_t max);
  /// A size: an integer of bytes or a string such as "64GiB" / "141GB".
  void read_bytes(std::string_view key, uint64_t& out, uint64_t min, uint64_t max);
  /// An array of numbers, each in min..max.
  void read(std::string_view key, std::vector<double>& out, double min, double max);
  void read(std::string_view key, double& out, bounds<double> b) { read(key, out, b.min, b.max); }
  void read(std::string_view key, uint64_t& out, bounds<uint64_t> b) { read(key, out, b.min, b.max); }
  void read(std::string_view key, uint32_t& out, bounds<uint64_t> b) {
    read(key, out, static_cast<uint32_t>(b.min), static_cast<uint32_t>(b.max));
  }
  void read_bytes(std::string_view key, uint64_t& out, bounds<uint64_t> b) { read_bytes(key, out, b.min, b.max); }
  /// A string that must be one of `choices`.
  void read_choice(std::string_view key, std::string& out, const std::vector<std::string_view>& choices);
  /// A string that must be one of an enum's spellings (runtime/config_names.hpp).
  template <class Spelling, class E>
  void read_enum(std::string_view key, E& out, std::span<const Spelling> names) {
    std::vector<std::string_view> choices;
    std::string current;
    for (const auto& s : names) {
      choices.push_back(s.name);
      if (s.value == out)
        current = s.name;
    }
    read_choice(key, current, choices);
    for (const auto& s : names)
      if (s.name == current)
        out = s.value;
  }

  /// A nested table, or nullptr if absent; marks the key as known.
  const toml::table* sub_table(std::string_view key);
  bool has(std::string_view key) const { return table_.contains(key); }
  void mark_known(std::string_view key) { known_.insert(std::string(key)); }

  /// Reports an error at `key` (or the table when key is empty).
  void fail(std::string_view key, const std::string& what);

  /// Checks for unknown keys among `allowed` ones. Returns the first error.
  caf::error finish(const std::vector<std::string_view>& allowed);

  std::string where(const toml::source_region& region) const;
  const std::string& file() const { return file_; }
  /// The file `key`'s value was written in (tables may be assembled from
  /// several files); file() when the value has no source.
  std::string file_of(std::string_view key) const;

private:
  const toml::node* lookup(std::string_view key);

  const toml::table& table_;
  std::string file_;
  std::string table_name_;
  std::set<std::string, std::less<>> known_;
  caf::error error_;
};

/// Levenshtein-closest candidate within distance 3, or empty.
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

/// Parses TOML text; syntax errors become errc::invalid_config naming file:line:column.
caf::expected<toml::table> parse_toml(std::string_view text, const std::string& file);
/// Reads and parses a file through read_text_file (regular files only, bounded size).
caf::expected<toml::table> parse_toml_file(const std::string& path, std::string_view what = "config file");

} // namespace kvtier
