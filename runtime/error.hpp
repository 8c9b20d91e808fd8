#pragma once
// kvtier's error vocabulary. Errors are values: functions return
// caf::expected<T> or caf::error; the context message carries one
// human-readable string that names where (file:line, key) and what was expected.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/message.hpp>

#include <cstdint>
#include <string>

namespace kvtier {

enum class errc : uint8_t {
  none = 0,
  invalid_config,   // a configuration file or value is wrong
  invalid_trace,    // a trace row cannot be parsed
  invalid_argument, // an API or CLI argument is out of its domain
  io_failure,       // the OS refused a read or write
  corrupted,        // data failed its checksum
  no_capacity,      // a tier has no room (a normal result, not a bug)
  unsupported,      // the feature is not available on this build or machine
  protocol,         // a peer sent something that does not follow the protocol
};

const char* to_string(errc code);

/// Builds an error in kvtier's category with a message for the user.
caf::error make_error(errc code, std::string message);

/// Renders any error, kvtier's or CAF's, as one line for the user.
std::string describe(const caf::error& err);

/// True if `err` belongs to kvtier's category and has code `code`.
bool is(const caf::error& err, errc code);

} // namespace kvtier
