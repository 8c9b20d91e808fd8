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

int run_nvme(const nvme_cli_options& o) {
  io::nvme_options opts;
  opts.queue_depth = o.queue_depth;
  opts.engine = o.engine == "threads" ? io::engine_choice::threads
                : o.engine == "io_uring" ? io::engine_choice::uring
                                         : io::engine_choice::automatic;
  std::filesystem::create_directories(o.dir);
  io::probe_result probe = io::probe_engine(opts.engine);
  const std::string scratch = o.dir + "/probe.slots";
  int fd = io::open_slot_file(scratch, true, probe);
  if (fd >= 0)
    ::close(fd);
  std::filesystem::remove(scratch);
  fmt::print("{}\n", probe.message());
  if (!o.calibrate)
    return 0;
  auto bytes = parse_bytes(o.file_size);
  if (!bytes) {
    fmt::print(stderr, "kvtier nvme: --file-size: {}\n", describe(bytes.error()));
    return 2;
  }
  auto profile = io::calibrate_nvme(opts, o.dir, *bytes, o.seconds);
  if (!profile) {
    fmt::print(stderr, "kvtier nvme: {}\n", describe(profile.error()));
    return 1;
  }
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
