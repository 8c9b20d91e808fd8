#pragma once
// Where the tests find the bundled traces: $KVTIER_SOURCE_DIR (set by
// kvtier_test) or the source dir compiled into build_info.

#include <kvtier/build_info.hpp>

#include <cstdlib>
#include <string>

namespace kvtier::sim::test {

inline std::string source_dir() {
  if (const char* dir = std::getenv("KVTIER_SOURCE_DIR"); dir && *dir)
    return dir;
  return build_info::source_dir;
}

inline std::string bundled(const std::string& file) {
  return source_dir() + "/sim/traces/" + file;
}

} // namespace kvtier::sim::test
