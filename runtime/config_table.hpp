#pragma once
// A config from a TOML table already parsed, for callers that assemble the
// table themselves (an experiment's base config with one sweep point's values
// set). Each node keeps the file it was read from, so an error names the file
// and line the user wrote, whichever file that was; relative paths (a trace, a
// hardware profile) resolve against the file that wrote them.

#include "runtime/config.hpp"

#include <toml++/toml.h>

namespace kvtier {

/// parse_config's reading and validation over `root`; `name` is the config's
/// source and stands for nodes that carry no file of their own.
caf::expected<config> config_of_table(const toml::table& root, const std::string& name);

} // namespace kvtier
