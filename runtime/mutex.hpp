#pragma once
// kvtier::mutex and kvtier::mutex_lock: std::mutex and std::unique_lock with
// clang's thread-safety annotations (thread_annotations.hpp), so that members
// declared GUARDED_BY(mutex_) are checked under -Wthread-safety.
//
// Waiting: mutex_lock::wait(cv) releases the mutex while it sleeps and holds
// it again when it returns. There is no predicate overload on purpose: a
// predicate lambda is analysed as a function of its own that holds no lock,
// so callers write `while (!ready) lock.wait(cv);` and the analysis sees the
// reads of guarded members under the lock.

#include "runtime/thread_annotations.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kvtier {

class CAPABILITY("mutex") mutex {
public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }

private:
  friend class mutex_lock;
  std::mutex m_;
};

class SCOPED_CAPABILITY mutex_lock {
public:
  explicit mutex_lock(mutex& m) ACQUIRE(m) : lock_(m.m_) {}
  ~mutex_lock() RELEASE() {}
  mutex_lock(const mutex_lock&) = delete;
  mutex_lock& operator=(const mutex_lock&) = delete;

  /// Lets go early (and lock() takes it again): for work outside the lock.
  void unlock() RELEASE() { lock_.unlock(); }
  void lock() ACQUIRE() { lock_.lock(); }

  // REQUIRES: held. Held again on return, whatever woke it.
  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::condition_variable& cv, const std::chrono::time_point<Clock, Duration>& until) {
    return cv.wait_until(lock_, until);
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::condition_variable& cv, const std::chrono::duration<Rep, Period>& period) {
    return cv.wait_for(lock_, period);
  }

private:
  std::unique_lock<std::mutex> lock_;
};

} // namespace kvtier
