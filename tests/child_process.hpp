#pragma once
// Child processes of a test that can never hold the test run up.
//
// A test's forked children inherit its stdout, which is ctest's pipe: a
// child that outlives the test (stuck, or orphaned when ctest kills the test)
// keeps that pipe open, and ctest waits for it to close until the test's
// timeout. So a forked child dies with its parent (fork_child), servers a
// test starts write to a file or /dev/null (never the pipe), and every wait
// has a deadline after which the child is killed and the test fails, naming it.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace kvtier::testing {

/// fork(), with the child tied to the test: the kernel kills it when the test
/// process ends, however that ends. Returns what fork() returns.
inline pid_t fork_child() {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) // the parent ended before prctl took effect
      ::_exit(99);
  }
  return pid;
}

/// Waits for `pid` up to `limit`; past it, kills it, fails the test naming
/// `what`, and returns 124. Otherwise its exit code, or 128 + the signal that
/// ended it.
inline int wait_child(pid_t pid, const std::string& what, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid)
      break;
    if (r < 0) {
      ADD_FAILURE() << what << " (pid " << pid << ") cannot be waited for";
      return 125;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << what << " (pid " << pid << ") still ran after " << limit.count() << " s and was killed";
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace kvtier::testing
