# Flags for kvtier's own C++ code: warnings are errors; optional sanitizers.
add_library(kvtier_flags INTERFACE)
target_compile_options(kvtier_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers>
  # A local that hides another local is a bug waiting; clang (fuzz and
  # thread-safety builds) spells the option differently, so GCC only.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wshadow=local>
  # GCC 12 at -O3 reports std::string appends as overlapping memcpy (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
# -DKVTIER_DEBUG_INFO=lines: line tables and function names only (-g1), for
# builds where no debugger runs but a sanitizer or crash report still names
# file:line (CI: docs/building.md). Full debug info is about a quarter of an
# -O2 compile's time and most of the link's input. Empty: the build type's.
set(KVTIER_DEBUG_INFO "" CACHE STRING "Debug info for kvtier's own code: empty (the build type's) or lines (-g1)")
set_property(CACHE KVTIER_DEBUG_INFO PROPERTY STRINGS "" lines)
if(KVTIER_DEBUG_INFO STREQUAL "lines")
  # After the build type's -g, so it wins (GCC and clang take the last -g level);
  # kvtier's own build only, not find_package(kvtier) users.
  target_compile_options(kvtier_flags INTERFACE $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-g1>>)
elseif(NOT KVTIER_DEBUG_INFO STREQUAL "")
  message(FATAL_ERROR "KVTIER_DEBUG_INFO=${KVTIER_DEBUG_INFO}: expected empty (the build type's debug info) or lines")
endif()
# Clang's thread-safety analysis over runtime/thread_annotations.hpp's
# GUARDED_BY / REQUIRES (GCC ignores them). scripts/thread-safety.sh runs the
# same check from a GCC build's compile_commands.json.
if(KVTIER_THREAD_SAFETY_ANALYSIS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KVTIER_THREAD_SAFETY_ANALYSIS needs clang (-DCMAKE_CXX_COMPILER=clang++-14); "
                        "the compiler is ${CMAKE_CXX_COMPILER_ID}. scripts/thread-safety.sh checks a GCC build's sources.")
  endif()
  target_compile_options(kvtier_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety>)
endif()
if(KVTIER_SANITIZE)
  # GCC's -fsanitize=undefined leaves out float-to-integer overflow (a double too large for an
  # int64 is undefined behaviour, not a saturated value): it has to be asked for by name.
  set(kvtier_sanitizers address,undefined,float-cast-overflow)
  target_compile_options(kvtier_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${kvtier_sanitizers} -fno-omit-frame-pointer
                              -fno-sanitize-recover=undefined,float-cast-overflow>)
  target_link_options(kvtier_flags INTERFACE -fsanitize=${kvtier_sanitizers})
endif()
if(KVTIER_FUZZ)
  # Every object gets libFuzzer's coverage hooks (fuzzer-no-link; the targets
  # link -fsanitize=fuzzer for its main). Any UBSan report stops the run, so
  # libFuzzer saves the input. _GLIBCXX_ASSERTIONS bounds-checks std containers.
  set(kvtier_fuzz_sanitizers fuzzer-no-link,address,undefined,float-cast-overflow)
  target_compile_options(kvtier_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${kvtier_fuzz_sanitizers} -fno-sanitize-recover=all
                              -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS>)
  target_link_options(kvtier_flags INTERFACE -fsanitize=address,undefined,float-cast-overflow)
endif()
if(KVTIER_TSAN)
  if(KVTIER_SANITIZE)
    message(FATAL_ERROR "KVTIER_TSAN and KVTIER_SANITIZE exclude each other: use two build directories")
  endif()
  target_compile_options(kvtier_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>)
  target_link_options(kvtier_flags INTERFACE -fsanitize=thread)
endif()

# -DKVTIER_UNITY_BUILD=ON: each test binary's sources compile as one
# translation unit (CMake's unity build), and the CLI's commands two by two
# (cli/CMakeLists.txt), so the headers, GoogleTest's, CAF's and CLI11's
# templates and inline functions are compiled once per unit instead of once
# per source. scripts/setup.sh turns it on (CI); docs/building.md has the
# measurements. A plain configure leaves it off, so a developer build still
# compiles each source alone. Two sources that define the same helper in an
# anonymous namespace cannot share a unit: one of them is marked
# SKIP_UNITY_BUILD_INCLUSION (or put in another UNITY_GROUP) where its target
# is defined, with a comment naming the clash.
option(KVTIER_UNITY_BUILD "Compile test binaries and CLI commands as fewer translation units (faster full builds)" OFF)
# GCC reports a type from an anonymous namespace used in a class (a test
# fixture, a pimpl's member) as -Wsubobject-linkage once its source is
# included by another file, as if it were a header; in the unit it is still
# local to one translation unit.
set(KVTIER_UNITY_PREAMBLE
  "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC diagnostic ignored \"-Wsubobject-linkage\"\n#endif")

# kvtier_test(NAME SOURCES... LIBS ...): one gtest binary, each TEST a ctest entry.
function(kvtier_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  if(KVTIER_UNITY_BUILD)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0
      UNITY_BUILD_CODE_BEFORE_INCLUDE "${KVTIER_UNITY_PREAMBLE}")
  endif()
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main kvtier_flags)
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "KVTIER_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
