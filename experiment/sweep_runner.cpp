#include "experiment/sweep_runner.hpp"

#include "experiment/html_report.hpp"
#include "experiment/point_run.hpp"
#include "experiment/results.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace kvtier::experiment {
namespace {

volatile std::sig_atomic_t interrupted_by = 0;

extern "C" void on_interrupt(int sig) {
  interrupted_by = sig;
}

// The child's whole life: run the point, write its record, exit. Exit codes
// other than 0 mean no record was written.
[[noreturn]] void run_child(const experiment_spec& spec, const sweep_point& point, const std::string& out_dir) {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  nlohmann::json record;
  auto cfg = config_of_point(spec, point);
  if (!cfg) {
    record = failure_record_of(point, describe(cfg.error()));
  } else {
    auto result = run_point(*cfg, spec.mode);
    record = result ? record_of(point, *result) : failure_record_of(point, describe(result.error()));
  }
  if (auto err = write_atomically(point_file(out_dir, point), record.dump(1) + "\n")) {
    fmt::print(stderr, "kvtier experiment: point {}: {}\n", point.index, describe(err));
    std::fflush(stderr);
    _exit(3);
  }
  std::fflush(stdout);
  _exit(0);
}

void draw(const sweep_options& o, const sweep_outcome& out, size_t running) {
  size_t done = out.reused + out.ran;
  int width = 30;
  int filled = out.points ? static_cast<int>(width * done / out.points) : width;
  fmt::print(o.progress, "\r  [{:<{}}] {}/{} points ({} reused, {} failed), {} running   ", std::string(filled, '#'),
             width, done, out.points, out.reused, out.failed, running);
  std::fflush(o.progress);
}

} // namespace

caf::expected<sweep_outcome> run_sweep(const experiment_spec& spec, const sweep_options& o) {
  auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir + "/points", ec);
  if (ec)
    return make_error(errc::io_failure, fmt::format("cannot make {}/points: {}", o.out_dir, ec.message()));
  // Temporaries of an interrupted run are never records: remove them.
  for (const auto& entry : std::filesystem::directory_iterator(o.out_dir + "/points", ec))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      std::filesystem::remove(entry.path(), ec);

  sweep_outcome out;
  out.points = spec.points.size();
  std::vector<const sweep_point*> pending;
  for (const auto& p : spec.points) {
    if (auto r = read_record(o.out_dir, p)) {
      ++out.reused;
      out.failed += (*r)["ok"].get<bool>() ? 0 : 1;
    } else {
      pending.push_back(&p);
    }
  }
  unsigned jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  interrupted_by = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt; // no SA_RESTART: waitpid returns EINTR
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::map<pid_t, const sweep_point*> running;
  size_t next = 0;
  caf::error crashed;
  std::fflush(o.progress);
  std::fflush(stdout);
  if (o.progress_bar)
    draw(o, out, 0);
  auto stop_children = [&] {
    for (const auto& [pid, p] : running)
      kill(pid, SIGKILL);
    for (const auto& [pid, p] : running)
      waitpid(pid, nullptr, 0);
    running.clear();
  };
  while (next < pending.size() || !running.empty()) {
    bool stopping = interrupted_by != 0 || (o.stop_after > 0 && out.ran >= o.stop_after);
    if (stopping) {
      stop_children();
      out.interrupted = true;
      break;
    }
    while (running.size() < jobs && next < pending.size()) {
      const auto* p = pending[next++];
      pid_t pid = fork();
      if (pid < 0) {
        crashed = make_error(errc::io_failure, fmt::format("cannot start a run: {}", std::strerror(errno)));
        break;
      }
      if (pid == 0)
        run_child(spec, *p, o.out_dir);
      running.emplace(pid, p);
    }
    if (crashed && running.empty())
      break;
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0)
      continue; // EINTR: the loop's head sees the interrupt
    auto it = running.find(pid);
    if (it == running.end())
      continue;
    const auto* p = it->second;
    running.erase(it);
    auto record = read_record(o.out_dir, *p);
    if (!record) {
      if (!crashed)
        crashed = make_error(errc::io_failure,
                             fmt::format("point {} ({}) left no record: {}", p->index, p->label,
                                         WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                                                             : fmt::format("exit status {}", WEXITSTATUS(status))));
      continue;
    }
    ++out.ran;
    bool ok = (*record)["ok"].get<bool>();
    out.failed += ok ? 0 : 1;
    if (o.progress_bar)
      draw(o, out, running.size());
    else
      fmt::print(o.progress, "  point {}/{} {}: {}\n", out.reused + out.ran, out.points, ok ? "done" : "FAILED",
                 p->label);
    std::fflush(o.progress);
  }
  if (o.progress_bar)
    fmt::print(o.progress, "\n");
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (crashed)
    return crashed;
  return out;
}

caf::error write_results(const experiment_spec& spec, const std::string& out_dir) {
  std::vector<nlohmann::json> records;
  for (const auto& p : spec.points) {
    auto r = read_record(out_dir, p);
    if (!r)
      return make_error(errc::invalid_argument,
                        fmt::format("point {} ({}) has no record in {}/points", p.index, p.label, out_dir));
    records.push_back(std::move(*r));
  }
  auto j = results_json(spec, records);
  if (auto err = write_atomically(out_dir + "/results.json", j.dump(1) + "\n"))
    return err;
  if (auto err = write_atomically(out_dir + "/results.csv", results_csv(spec, records)))
    return err;
  return write_atomically(out_dir + "/report.html", html_report(j));
}

} // namespace kvtier::experiment
