# The model's CPU twin (test_model): RoPE with Llama-3 scaling, paged
# attention against a dense reference, the forward pass's independence from
# chunking and slots, the sampler; tiny shapes, milliseconds each.
if(KVTIER_GPU_ONLY AND NOT KVTIER_GPU_TESTS)
  return() # no GoogleTest on this GPU machine (cmake/KvtierGpuOnly.cmake)
endif()
kvtier_test(test_model
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp
  LIBS kvtier_model)
