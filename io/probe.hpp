#pragma once
// Start-up probe, as Seastar picks its reactor backend: io_uring if it works
// here, else the pread/pwrite thread pool; O_DIRECT if the filesystem takes
// it, else buffered I/O. Each choice carries the reason, for one log line.

#include "io/nvme_options.hpp"

#include <string>

namespace kvtier::io {

struct probe_result {
  engine_choice engine = engine_choice::threads; // never automatic
  std::string engine_why;
  bool direct_io = false;
  std::string direct_why = "not probed yet";

  /// "NVMe tier: io_uring (...); O_DIRECT (...)" -- what a user reads in the log.
  std::string message() const;
};

/// Which engine `wanted` resolves to here, and why.
probe_result probe_engine(engine_choice wanted);

/// Opens (creating if needed) `file` for reading and writing, with O_DIRECT
/// when `want_direct` and the filesystem allows it; fills the direct fields.
/// Returns the fd or -errno.
int open_slot_file(const std::string& file, bool want_direct, probe_result& result);

} // namespace kvtier::io
