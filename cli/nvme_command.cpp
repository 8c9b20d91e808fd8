// `kvtier nvme`: which I/O engine the NVMe tier uses here and why; with
// --calibrate, measures the tier through kvtier's own slot store and prints
// the hardware profile's [nvme_device] table for the simulator.

#include "cli/commands.hpp"
#include "io/calibration.hpp"
#include "io/probe.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>

namespace kvtier::cli {
namespace {

struct nvme_cli_options {
  std::string dir = "/var/tmp/kvtier";
  bool calibrate = false;
  double seconds = 2;
  std::string file_size = "1GiB";
  uint32_t queue_depth = 32;
  std::string engine = "auto";
};

int fail(const std::string& message, int code = 2) {
  fmt::print(stderr, "kvtier nvme: {}\n", message);
  return code;
}

// Longest measured point: as io/calibration.cpp allows.
constexpr double max_seconds = 86'400;
constexpr uint32_t max_queue_depth = 4096;

int run_nvme(const nvme_cli_options& o) {
  io::nvme_options opts;
  if (o.queue_depth == 0 || o.queue_depth > max_queue_depth)
    return fail(fmt::format("--queue-depth: expected 1..{}, got {}", max_queue_depth, o.queue_depth));
  opts.queue_depth = o.queue_depth;
  if (o.engine == "threads")
    opts.engine = io::engine_choice::threads;
  else if (o.engine == "io_uring")
    opts.engine = io::engine_choice::uring;
  else if (o.engine == "auto")
    opts.engine = io::engine_choice::automatic;
  else
    return fail(fmt::format("--engine: expected auto, io_uring or threads, got \"{}\"", o.engine));
  uint64_t file_bytes = 0;
  if (o.calibrate) { // checked before anything touches the disk
    if (!(o.seconds > 0) || !(o.seconds <= max_seconds))
      return fail(fmt::format("--seconds: expected seconds in (0, {}], got {}", max_seconds, o.seconds));
    auto bytes = parse_bytes(o.file_size);
    if (!bytes)
      return fail(fmt::format("--file-size: {}", describe(bytes.error())));
    file_bytes = *bytes;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec)
    return fail(fmt::format("--dir {}: cannot create the folder: {}", o.dir, ec.message()));
  io::probe_result probe = io::probe_engine(opts.engine);
  const std::string scratch = o.dir + "/probe.slots";
  int fd = io::open_slot_file(scratch, true, probe);
  if (fd < 0)
    return fail(fmt::format("--dir {}: cannot create a file there: {}", o.dir, std::strerror(-fd)));
  ::close(fd);
  std::filesystem::remove(scratch, ec); // a leftover probe file costs nothing
  fmt::print("{}\n", probe.message());
  if (!o.calibrate)
    return 0;
  auto profile = io::calibrate_nvme(opts, o.dir, file_bytes, o.seconds);
  if (!profile)
    return fail(describe(profile.error()), 1);
  fmt::print("{}", nvme_device_toml(*profile));
  return 0;
}

} // namespace

command add_nvme_command(CLI::App& app) {
  auto opts = std::make_shared<nvme_cli_options>();
  CLI::App* sub = app.add_subcommand("nvme", "Probe the NVMe tier's I/O engine; --calibrate measures it");
  sub->add_option("--dir", opts->dir, "directory on the NVMe device")->capture_default_str();
  sub->add_flag("--calibrate", opts->calibrate, "measure and print the [nvme_device] table");
  sub->add_option("--seconds", opts->seconds, "seconds per measured point")->capture_default_str();
  sub->add_option("--file-size", opts->file_size, "scratch slot file size")->capture_default_str();
  sub->add_option("--queue-depth", opts->queue_depth, "requests in flight")->capture_default_str();
  sub->add_option("--engine", opts->engine, "auto | io_uring | threads")->capture_default_str();
  return {sub, [opts] { return run_nvme(*opts); }};
}

} // namespace kvtier::cli
