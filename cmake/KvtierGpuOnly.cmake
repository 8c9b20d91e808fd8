# -DKVTIER_GPU_ONLY=ON: the CUDA parts alone, for a GPU machine that has nvcc
# and CMake but none of kvtier's other dependencies (CAF, TOML++, fmt, ...).
# Builds kernels/ (copy and quant, with their CUDA code), their tests
# (test_copy, test_copy_cuda, quant_cuda_check) and their benchmarks
# (bench/transfer, bench_quant), and client/ (kvtierd's client library, which
# needs no library) for client_cuda_check. CUDA is required here, not optional.
# GoogleTest: the system's, else its sources in KVTIER_GTEST_DIR (a copy of
# /usr/src/googletest), else only the tests without it (quant_cuda_check) are
# built, and configure says so.
find_package(Threads REQUIRED)
set(KVTIER_WITH_CUDA ON)
include(KvtierCuda)
if(NOT KVTIER_HAVE_CUDA)
  message(FATAL_ERROR "KVTIER_GPU_ONLY=ON needs nvcc (set CMAKE_CUDA_COMPILER or put it on PATH)")
endif()
include(KvtierTargets)

add_subdirectory(client)
add_subdirectory(kernels)
set(KVTIER_GPU_TESTS OFF CACHE INTERNAL "kernels/ tests are built (scripts/gpu-check.sh reads it)")
if(KVTIER_BUILD_TESTS)
  set(KVTIER_GTEST_DIR "${PROJECT_SOURCE_DIR}/third_party/googletest" CACHE PATH "GoogleTest sources, when the system has none")
  find_package(GTest QUIET)
  if(NOT GTest_FOUND AND EXISTS ${KVTIER_GTEST_DIR}/CMakeLists.txt)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory(${KVTIER_GTEST_DIR} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
    set(GTest_FOUND ON)
  endif()
  if(GTest_FOUND)
    set(KVTIER_GPU_TESTS ON CACHE INTERNAL "kernels/ tests are built (scripts/gpu-check.sh reads it)")
    include(GoogleTest)
  else()
    message(STATUS "kvtier: no GoogleTest (system or KVTIER_GTEST_DIR=${KVTIER_GTEST_DIR}): "
                   "only quant_cuda_check of kernels/ tests is built")
  endif()
  enable_testing()
  add_subdirectory(tests/kernels)
endif()
if(KVTIER_BUILD_BENCH)
  add_subdirectory(bench/kernels)
endif()
