# The model's CPU twin (test_model): RoPE with Llama-3 scaling, paged
# attention against a dense reference, the forward pass's independence from
# chunking and slots, the sampler; tiny shapes, milliseconds each. And, with
# CUDA, model_cuda_check: the CUDA twin against the CPU twin (exit 77 =
# skipped: no GPU here).
if(KVTIER_HAVE_CUDA)
  add_executable(model_cuda_check ${CMAKE_CURRENT_LIST_DIR}/model_cuda_check.cpp)
  target_link_libraries(model_cuda_check PRIVATE kvtier_model_cuda kvtier_flags)
  add_test(NAME kernels.model_cuda_matches_cpu COMMAND model_cuda_check)
  set_tests_properties(kernels.model_cuda_matches_cpu PROPERTIES SKIP_RETURN_CODE 77)
endif()
if(KVTIER_GPU_ONLY AND NOT KVTIER_GPU_TESTS)
  return() # no GoogleTest on this GPU machine (cmake/KvtierGpuOnly.cmake)
endif()
kvtier_test(test_model
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp
  LIBS kvtier_model)
