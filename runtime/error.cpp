#include "runtime/error.hpp"

#include <caf/atom.hpp>
#include <caf/sec.hpp>

namespace kvtier {
namespace {
constexpr caf::atom_value category = caf::atom("kvtier");
} // namespace

const char* to_string(errc code) {
  switch (code) {
    case errc::none:
      return "none";
    case errc::invalid_config:
      return "invalid_config";
    case errc::invalid_trace:
      return "invalid_trace";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::io_failure:
      return "io_failure";
    case errc::corrupted:
      return "corrupted";
    case errc::no_capacity:
      return "no_capacity";
    case errc::unsupported:
      return "unsupported";
    case errc::protocol:
      return "protocol";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), category, caf::make_message(std::move(message))};
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  const auto& ctx = err.context();
  if (err.category() == category) {
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      return ctx.get_as<std::string>(0);
    return to_string(static_cast<errc>(err.code()));
  }
  std::string out = caf::to_string(err.category());
  out += " error ";
  out += std::to_string(err.code());
  if (!ctx.empty()) {
    out += ": ";
    out += caf::to_string(ctx);
  }
  return out;
}

bool is(const caf::error& err, errc code) {
  if (!err)
    return false; // an empty error has no category to read
  return err.category() == category && err.code() == static_cast<uint8_t>(code);
}

} // namespace kvtier
