# bench/model: the model's GPU twin at Llama-3-8B geometry against PyTorch
# (model_torch_baseline.py, run by scripts/gpu-model-check.sh on the GPU machine).
if(KVTIER_HAVE_CUDA)
  add_executable(bench_model ${CMAKE_CURRENT_LIST_DIR}/bench_model.cpp)
  target_link_libraries(bench_model PRIVATE kvtier_model_cuda kvtier_flags)
  set_target_properties(bench_model PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench OUTPUT_NAME model)
  # bench/stream: decode over KV partly in DRAM, streamed layer by layer; the 1M-token moonshot.
  add_executable(bench_stream ${CMAKE_CURRENT_LIST_DIR}/bench_stream.cpp)
  target_link_libraries(bench_stream PRIVATE kvtier_model_cuda kvtier_flags)
  set_target_properties(bench_stream PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench OUTPUT_NAME stream)
endif()
