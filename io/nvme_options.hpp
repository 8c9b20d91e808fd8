#pragma once
// Knobs of the NVMe tier, read from the [tiers.nvme] table beside the keys
// runtime/config owns (enabled, capacity, path).

#include "io/page_file.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier {
class toml_reader;
struct config;
}

namespace kvtier::io {

enum class engine_choice : uint8_t { automatic, uring, threads };
enum class open_policy : uint8_t { reuse, reformat };

struct nvme_options {
  std::string file;                 // the slot file (see slot_file_path)
  engine_choice engine = engine_choice::automatic;
  /// Requests in flight at once. 32 saturates one NVMe namespace for blocks
  /// of 64 KiB and more; smaller blocks want more (the device's own QD is 1024+).
  uint32_t queue_depth = 32;
  bool sqpoll = false;              // a kernel thread polls the SQ: no syscall per batch, one busy core
  bool direct_io = true;            // O_DIRECT; falls back to buffered (with a message) where refused
  /// Blocks of at least this many bytes are "large": their file uses the split
  /// layout (payloads on a 2 MiB grid, headers apart; slot_format.hpp) and a
  /// write is two SQEs, header and payload. Smaller blocks keep header and
  /// payload adjacent and a write is one WRITEV SQE: for them a second request
  /// costs more than the alignment gains. Measured on the benchmark VM;
  /// docs/io.md has the numbers.
  uint64_t large_block_bytes = 256 << 10;
  /// io_uring fixed buffers over the DRAM pool: every read, and the writes of
  /// large blocks (an adjacent write's two iovecs cannot use them).
  bool register_buffers = true;
  /// A failed write is retried this often before it is reported (the block stays in DRAM).
  uint32_t write_retries = 2;
  /// A failed or unverifiable read is retried this often before it is reported as a miss.
  uint32_t read_retries = 1;
  /// A request with no completion after this long is failed (and retried);
  /// far above any healthy device's worst case (NVMe spec timeouts are 30 s).
  uint32_t io_timeout_ms = 30'000;
  /// What open does with a kvtier slot file that is already there ([tiers.nvme]
  /// on_open): `reuse` keeps every intact block (a file formatted for another
  /// geometry, or whose superblock cannot be rebuilt, is then an error that
  /// names the file); `reformat` discards the contents. A file that is not
  /// kvtier's is formatted either way (slot_file.hpp).
  open_policy on_open = open_policy::reuse;
  /// Wraps the engine (tests: fault injection). Identity when empty.
  std::function<std::unique_ptr<page_file>(std::unique_ptr<page_file>)> decorate;
};

/// The keys read_nvme_options knows, for the caller's unknown-key check.
const std::vector<std::string_view>& nvme_option_keys();

/// Reads this module's keys from the [tiers.nvme] table's reader.
void read_nvme_options(toml_reader& reader, nvme_options& out);

/// Reads them from a whole config text (other tables and keys are ignored).
caf::expected<nvme_options> parse_nvme_options(std::string_view toml_text, const std::string& name);

/// The options for a loaded config: its file's [tiers.nvme] keys (defaults
/// when the config came from no file), and file = slot_file_path(tiers.nvme_path).
caf::expected<nvme_options> load_nvme_options(const config& cfg);

/// The slot file inside the configured tiers.nvme_path directory.
std::string slot_file_path(const std::string& nvme_path);

std::string_view to_string(engine_choice e);

} // namespace kvtier::io
