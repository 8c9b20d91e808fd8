// The test helpers for child processes hold what tests/child_process.hpp
// promises: a child past its deadline is killed and fails the test, and a
// forked child dies with its parent.

#include "tests/child_process.hpp"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <fcntl.h>

namespace kvtier::testing {
namespace {

TEST(child_process, a_child_past_its_deadline_is_killed_and_fails_the_test) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  int rc = 0;
  EXPECT_NONFATAL_FAILURE(rc = wait_child(child, "the sleeper", std::chrono::seconds(1)),
                          "the sleeper (pid " + std::to_string(child) + ") still ran after 1 s and was killed");
  EXPECT_EQ(rc, 124);
  EXPECT_EQ(::kill(child, 0), -1); // reaped: no such process
}

TEST(child_process, exit_codes_and_signals_come_back) {
  const pid_t exits = ::fork();
  if (exits == 0)
    ::_exit(7);
  EXPECT_EQ(wait_child(exits, "exits"), 7);
  const pid_t killed = ::fork();
  if (killed == 0) {
    ::pause();
    ::_exit(0);
  }
  ::kill(killed, SIGTERM);
  EXPECT_EQ(wait_child(killed, "killed"), 128 + SIGTERM);
}

TEST(child_process, a_forked_child_dies_with_its_parent) {
  // A middle process forks a grandchild that would wait for ever, then
  // exits; the grandchild must end with it, closing the pipe it holds.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    if (fork_child() == 0) {
      ::close(fds[0]);
      ::pause(); // holds fds[1] open until killed
      ::_exit(0);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  EXPECT_EQ(wait_child(middle, "the middle process"), 0);
  // EOF only once every writer is gone: the grandchild was killed. A
  // grandchild that outlived its parent would block this read for ever,
  // so poll with a deadline.
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  char c;
  ssize_t n = -1;
  while ((n = ::read(fds[0], &c, 1)) < 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(n, 0) << "the grandchild still holds the pipe";
  ::close(fds[0]);
}

} // namespace
} // namespace kvtier::testing
