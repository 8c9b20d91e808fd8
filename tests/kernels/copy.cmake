# The mover's byte-exact tests. test_copy (CPU twin, planning; the peer
# copier's CPU twin) runs everywhere, CI included; test_copy_cuda compiles the same mover tests
# against the GPU mover, only with CUDA, and skips without a GPU.
# peer_cuda_check, only with CUDA: prefill on GPU 0, the blocks moved to GPU 1
# by the peer copier, decode there against GPU 0 (scripts/gpu-peer-check.sh;
# exit 0 with "needs two GPUs: skipped" on fewer). Not a ctest entry: CI has
# no GPU and a one-GPU machine has nothing to run.
if(KVTIER_HAVE_CUDA)
  add_executable(peer_cuda_check ${CMAKE_CURRENT_LIST_DIR}/peer_cuda_check.cpp)
  target_link_libraries(peer_cuda_check PRIVATE kvtier_copy_core kvtier_model_cuda kvtier_flags)
endif()
if(KVTIER_GPU_ONLY AND NOT KVTIER_GPU_TESTS)
  return() # no GoogleTest on this GPU machine (cmake/KvtierGpuOnly.cmake)
endif()
kvtier_test(test_copy
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/copy_codec_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/copy_mover_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/copy_peer_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/copy_plan_test.cpp
  LIBS kvtier_copy_core)
# Defines layers as copy_mover_test.cpp does: compiled alone (KVTIER_UNITY_BUILD).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/copy_codec_test.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

if(KVTIER_HAVE_CUDA)
  # Same test names as test_copy's mover tests: ctest entries get a "cuda." prefix.
  add_executable(test_copy_cuda ${CMAKE_CURRENT_LIST_DIR}/copy_codec_test.cpp ${CMAKE_CURRENT_LIST_DIR}/copy_mover_test.cpp)
  target_link_libraries(test_copy_cuda PRIVATE kvtier_copy_core GTest::gtest GTest::gtest_main kvtier_flags)
  target_compile_definitions(test_copy_cuda PRIVATE KVTIER_COPY_TEST_CUDA=1)
  gtest_discover_tests(test_copy_cuda TEST_PREFIX "cuda." WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "KVTIER_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
