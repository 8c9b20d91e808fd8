#pragma once
// Clang's thread-safety annotations (-Wthread-safety), as LevelDB and Abseil
// spell them. Under clang they let the compiler prove that every access to a
// GUARDED_BY member holds its mutex; under GCC they expand to nothing.
// scripts/thread-safety.sh (or -DKVTIER_THREAD_SAFETY_ANALYSIS=ON with clang)
// runs the analysis. The annotated mutex itself is runtime/mutex.hpp:
// std::mutex carries no annotations in libstdc++, so members guarded by one
// cannot be checked.

#if defined(__clang__)
#define KVTIER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KVTIER_THREAD_ANNOTATION(x)
#endif

/// A type that is a lock (runtime/mutex.hpp's kvtier::mutex).
#define CAPABILITY(name) KVTIER_THREAD_ANNOTATION(capability(name))
/// An RAII holder of a lock (kvtier::mutex_lock).
#define SCOPED_CAPABILITY KVTIER_THREAD_ANNOTATION(scoped_lockable)
/// The member may be read or written only while `lock` is held.
#define GUARDED_BY(lock) KVTIER_THREAD_ANNOTATION(guarded_by(lock))
/// What the pointer points to may be touched only while `lock` is held.
#define PT_GUARDED_BY(lock) KVTIER_THREAD_ANNOTATION(pt_guarded_by(lock))
/// The caller must hold the locks.
#define REQUIRES(...) KVTIER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// The caller must not hold the locks (the function takes them).
#define EXCLUDES(...) KVTIER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) KVTIER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) KVTIER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) KVTIER_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
/// The function is exempt: say why beside it.
#define NO_THREAD_SAFETY_ANALYSIS KVTIER_THREAD_ANNOTATION(no_thread_safety_analysis)
