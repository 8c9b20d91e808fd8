# The mover's byte-exact tests. test_copy (CPU twin, planning, the CAF
# engine) runs everywhere, CI included; test_copy_cuda compiles the same mover
# tests against the GPU mover, only with CUDA, and skips without a GPU.
kvtier_test(test_copy
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/copy_mover_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/copy_plan_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/copy_engine_test.cpp
  LIBS kvtier_copy)

if(KVTIER_HAVE_CUDA)
  kvtier_test(test_copy_cuda
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/copy_mover_test.cpp
    LIBS kvtier_copy_core)
  target_compile_definitions(test_copy_cuda PRIVATE KVTIER_COPY_TEST_CUDA=1)
endif()
