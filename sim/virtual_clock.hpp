#pragma once
// The simulator's clock is CAF's actor clock under the test scheduler:
// int64 nanoseconds. Every conversion from model seconds (a double) to that
// clock goes through virtual_duration(), which never overflows:
//  (1) traces are refused at build time when an arrival lies past
//      max_arrival_s (sim/trace.hpp), so ordinary runs stay far below the cap;
//  (2) anything later, NaN included, saturates at max_virtual_seconds, and a
//      run whose clock reached that cap is an error (clock_saturated), never a
//      result: a float-to-integer conversion past int64 is undefined
//      behaviour that GCC's UBSan does not report.

#include <caf/actor_clock.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>

namespace kvtier::sim {

/// The cap: 2^62 ns, about 146 years, half of int64's range, so the epoch
/// plus a capped duration cannot overflow either.
inline constexpr int64_t max_virtual_ns = int64_t{1} << 62;
inline constexpr double max_virtual_seconds = static_cast<double>(max_virtual_ns) / 1e9;

/// `seconds` as whole nanoseconds, truncated as std::chrono::duration_cast
/// truncates; below 0 gives 0, past the cap (or NaN) gives max_virtual_ns.
inline int64_t virtual_ns(double seconds) {
  if (!(seconds < max_virtual_seconds)) // NaN lands here too
    return max_virtual_ns;
  if (!(seconds > 0))
    return 0;
  return static_cast<int64_t>(seconds * 1e9); // < 2^63 by the test above
}

/// The same, rounded to the nearest nanosecond.
inline int64_t virtual_ns_nearest(double seconds) {
  if (!(seconds < max_virtual_seconds))
    return max_virtual_ns;
  if (!(seconds > 0))
    return 0;
  return std::llround(seconds * 1e9);
}

/// A clock duration of `seconds`, saturating as virtual_ns.
inline caf::actor_clock::duration_type virtual_duration(double seconds) {
  return std::chrono::duration_cast<caf::actor_clock::duration_type>(std::chrono::nanoseconds{virtual_ns(seconds)});
}

} // namespace kvtier::sim
