#pragma once
// The one place that turns an errno into kvtier's error vocabulary.

#include "runtime/error.hpp"

#include <string>

namespace kvtier::io {

/// errc::no_capacity for ENOSPC/EDQUOT, errc::unsupported for EINVAL/EOPNOTSUPP
/// on setup calls is the caller's choice; everything else is errc::io_failure.
/// The message reads "WHAT: strerror (ENAME)".
caf::error os_error(int err, const std::string& what);

/// "EIO", "ENOSPC", ... or the number.
std::string errno_name(int err);

} // namespace kvtier::io
