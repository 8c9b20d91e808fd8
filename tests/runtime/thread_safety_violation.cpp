// Not built: tests/CMakeLists.txt has clang's thread-safety analysis check
// this file and expects it to be rejected, so GUARDED_BY stays a checked
// annotation rather than a comment.

#include "runtime/mutex.hpp"
#include "runtime/worker_queue.hpp"

namespace {

class counter {
public:
  void add_unlocked() { ++count_; } // the analysis must reject this
  void add() {
    kvtier::mutex_lock lock{mutex_};
    ++count_;
    bump();
  }
  void bump_unlocked() { bump(); } // and this: bump() REQUIRES the lock

private:
  void bump() REQUIRES(mutex_) { ++count_; }
  kvtier::mutex mutex_;
  int count_ GUARDED_BY(mutex_) = 0;
};

} // namespace

int main() {
  counter c;
  c.add();
  c.add_unlocked();
  c.bump_unlocked();
  kvtier::worker_queue<int> q(1, [](int&) {});
  return q.push(1) ? 0 : 1;
}
