#pragma once
// KVTIER_CHECK: a caller bug, caught in every build type (release included).
// Use for broken preconditions only; "no room" and bad input are values.

#include <cstdio>
#include <cstdlib>

#define KVTIER_CHECK(condition, message)                                                                               \
  do {                                                                                                                 \
    if (!(condition)) [[unlikely]] {                                                                                   \
      std::fprintf(stderr, "kvtier: bug: %s (%s:%d: %s)\n", message, __FILE__, __LINE__, #condition);                  \
      std::abort();                                                                                                    \
    }                                                                                                                  \
  } while (false)
