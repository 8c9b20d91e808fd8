// bench_page_store: random reads and writes of whole blocks through kvtier's
// NVMe store, against fio (ioengine=io_uring, O_DIRECT) on the same file with
// the same block size and queue depth, in the same run. The two alternate
// (fio first on even repetitions, kvtier first on odd) and each row reports
// medians, because a virtual disk drifts 30-40% between runs.
//
// kvtier moves a 4 KiB header with every block (slot_format.hpp); MiB/s counts
// payload only, so the header is kvtier's cost, not its credit.
//
//   bench_page_store [--dir D] [--file-mib N] [--seconds S] [--reps R]
//                    [--sizes 4k,64k,256k,2m] [--qds 1,32] [--json OUT]
//                    [--engine auto|io_uring|threads] [--register-buffers 0|1] [--large-block 256k]
//                    [--no-fio 0|1] [--patterns randread,randwrite]   (--help: this list)

#include "io/calibration.hpp"
#include "io/slot_store.hpp"
#include "runtime/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

using namespace kvtier;
using namespace kvtier::io;
using json = nlohmann::json;

namespace {

struct args {
  std::string dir = "/var/tmp/kvtier-bench";
  uint64_t file_mib = 1024;
  double seconds = 2;
  int reps = 3;
  std::vector<uint64_t> sizes{4 << 10, 64 << 10, 256 << 10, 2 << 20};
  std::vector<uint32_t> qds{1, 32};
  std::string json_out;
  std::string engine = "auto";
  bool register_buffers = true;
  uint64_t large_block = 256 << 10;
  bool run_fio = true;
  std::vector<std::string> patterns{"randread", "randwrite"};
};

uint64_t parse_size(const std::string& s) {
  uint64_t n = std::stoull(s);
  char unit = s.empty() ? ' ' : static_cast<char>(std::tolower(s.back()));
  return unit == 'k' ? n << 10 : unit == 'm' ? n << 20 : n;
}

template <class T, class F>
std::vector<T> split(const std::string& s, F f) {
  std::vector<T> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(static_cast<T>(f(item)));
  return out;
}

std::string size_name(uint64_t b) {
  return b >= (1 << 20) ? std::to_string(b >> 20) + "MiB" : std::to_string(b >> 10) + "KiB";
}

struct sample {
  double iops = 0;
  double mib_s = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// -- fio --------------------------------------------------------------------------

sample run_fio(const std::string& file, uint64_t file_bytes, uint64_t bs, uint32_t qd, bool write, double seconds) {
  std::string cmd = "fio --name=kvtier --filename=" + file + " --rw=" + (write ? "randwrite" : "randread") +
      " --bs=" + std::to_string(bs) + " --iodepth=" + std::to_string(qd) +
      " --ioengine=io_uring --direct=1 --size=" + std::to_string(file_bytes) + " --runtime=" + std::to_string(seconds) +
      " --time_based --norandommap --randrepeat=0" + " --output-format=json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p)
    return {};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  ::pclose(p);
  auto brace = out.find('{');
  if (brace == std::string::npos)
    return {};
  auto j = json::parse(out.substr(brace), nullptr, false);
  if (j.is_discarded())
    return {};
  const auto& side = j["jobs"][0][write ? "write" : "read"];
  return {side["iops"].get<double>(), side["bw_bytes"].get<double>() / (1 << 20)};
}

} // namespace

int main(int argc, char** argv) {
  args a;
  const char* usage =
      "bench_page_store [--dir D] [--file-mib N] [--seconds S] [--reps R] [--sizes 4k,64k,256k,2m] [--qds 1,32]\n"
      "                 [--json OUT] [--engine auto|io_uring|threads] [--register-buffers 0|1] [--large-block 256k]\n"
      "                 [--no-fio 0|1] [--patterns randread,randwrite]\n";
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]} == "-h" || std::string{argv[i]} == "--help") {
      std::cout << usage;
      return 0;
    }
  if ((argc - 1) % 2 != 0) { // every option takes a value: a lone last word would be dropped and the run would start
    std::cerr << "bench_page_store: " << argv[argc - 1] << " needs a value\n" << usage;
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir")
      a.dir = v;
    else if (k == "--file-mib")
      a.file_mib = std::stoull(v);
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--reps")
      a.reps = std::stoi(v);
    else if (k == "--sizes")
      a.sizes = split<uint64_t>(v, parse_size);
    else if (k == "--qds")
      a.qds = split<uint32_t>(v, [](const std::string& s) { return std::stoul(s); });
    else if (k == "--json")
      a.json_out = v;
    else if (k == "--engine")
      a.engine = v;
    else if (k == "--register-buffers")
      a.register_buffers = v != "0";
    else if (k == "--large-block")
      a.large_block = parse_size(v);
    else if (k == "--no-fio")
      a.run_fio = v == "0";
    else if (k == "--patterns")
      a.patterns = split<std::string>(v, [](const std::string& x) { return x; });
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  std::filesystem::create_directories(a.dir);
  const std::string file = a.dir + "/bench.slots";
  const uint32_t max_qd = *std::max_element(a.qds.begin(), a.qds.end());
  json rows = json::array();
  std::string engine_line;
  uint64_t total_errors = 0;
  std::printf("%-7s %-9s %3s | %10s %9s | %10s %9s | %6s\n", "block", "pattern", "QD", "fio IOPS", "fio MiB/s",
              "kvt IOPS", "kvt MiB/s", "ratio");
  for (uint64_t bs : a.sizes) {
    std::filesystem::remove(file);
    nvme_options o;
    o.file = file;
    o.queue_depth = max_qd;
    o.register_buffers = a.register_buffers;
    o.large_block_bytes = a.large_block;
    o.engine = a.engine == "threads" ? engine_choice::threads
        : a.engine == "io_uring"     ? engine_choice::uring
                                     : engine_choice::automatic;
    const uint32_t slots = static_cast<uint32_t>((a.file_mib << 20) / (bs + sector_bytes));
    tier_layout layout{slot_order::block_major, max_qd, 1, bs};
    void* mem = nullptr;
    if (posix_memalign(&mem, 4096, layout.total_bytes()) != 0)
      return 1;
    std::unique_ptr<void, decltype(&std::free)> dram{mem, &std::free};
    std::mt19937_64 fill{42};
    for (uint64_t i = 0; i < layout.total_bytes() / 8; ++i)
      static_cast<uint64_t*>(mem)[i] = fill();
    auto opened = slot_store::open(o, slots, {static_cast<std::byte*>(mem), layout});
    if (!opened) {
      std::cerr << describe(opened.error()) << "\n";
      return 1;
    }
    auto& store = **opened;
    if (engine_line.empty()) {
      engine_line = store.report().message();
      std::fprintf(stderr, "%s\n", engine_line.c_str());
    }
    total_errors += fill_slots(store);
    const uint64_t file_bytes = store.geometry().file_bytes();
    for (bool write : {false, true})
      for (uint32_t qd : a.qds) {
        if (std::find(a.patterns.begin(), a.patterns.end(), write ? "randwrite" : "randread") == a.patterns.end())
          continue;
        std::vector<double> f_iops, f_mib, k_iops, k_mib;
        uint64_t errors = 0;
        for (int rep = 0; rep < a.reps; ++rep)
          for (int turn = 0; turn < 2; ++turn) {
            if ((turn == 0) == (rep % 2 == 0)) {
              if (!a.run_fio)
                continue;
              auto s = run_fio(file, file_bytes, bs, qd, write, a.seconds);
              f_iops.push_back(s.iops);
              f_mib.push_back(s.mib_s);
            } else {
              auto s = run_random_load(store, write ? page_op::write : page_op::read, qd, a.seconds,
                                       static_cast<uint64_t>(rep));
              errors += s.errors;
              k_iops.push_back(s.iops);
              k_mib.push_back(s.mib_s);
            }
          }
        total_errors += errors;
        double fi = median(f_iops), fm = median(f_mib), ki = median(k_iops), km = median(k_mib);
        double ratio = fm > 0 ? km / fm : 0;
        const char* pattern = write ? "randwrite" : "randread";
        std::printf("%-7s %-9s %3u | %10.0f %9.1f | %10.0f %9.1f | %5.1f%%\n", size_name(bs).c_str(), pattern, qd, fi,
                    fm, ki, km, ratio * 100);
        std::fflush(stdout);
        rows.push_back({{"block_bytes", bs},
                        {"pattern", pattern},
                        {"queue_depth", qd},
                        {"fio_iops", fi},
                        {"fio_mib_s", fm},
                        {"kvtier_iops", ki},
                        {"kvtier_mib_s", km},
                        {"ratio", ratio},
                        {"fio_mib_s_runs", f_mib},
                        {"kvtier_mib_s_runs", k_mib},
                        {"kvtier_errors", errors},
                        {"layout", store.report().layout}});
      }
  }
  std::filesystem::remove(file);
  json out{{"benchmark", "page_store"},
           {"baseline", "fio --ioengine=io_uring --direct=1, same file, block size and queue depth"},
           {"engine", engine_line},
           {"file_mib", a.file_mib},
           {"seconds_per_run", a.seconds},
           {"repetitions", a.reps},
           {"statistic", "median of the repetitions, the two tools interleaved"},
           {"payload_only", true},
           {"errors", total_errors},
           {"rows", rows}};
  std::printf("%s\n", out.dump(2).c_str());
  if (!a.json_out.empty()) {
    std::filesystem::create_directories(std::filesystem::path(a.json_out).parent_path());
    std::ofstream(a.json_out) << out.dump(2) << "\n";
  }
  return total_errors == 0 ? 0 : 1;
}
