# bench/transfer: the HBM <-> DRAM engine against plain CUDA copies in the
# same run (needs a GPU; built only with CUDA). Output: build/bench/transfer.
if(KVTIER_HAVE_CUDA)
  add_executable(bench_transfer ${CMAKE_CURRENT_LIST_DIR}/copy_transfer.cpp)
  target_link_libraries(bench_transfer PRIVATE kvtier_copy_core kvtier_flags)
  set_target_properties(bench_transfer PROPERTIES OUTPUT_NAME transfer
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endif()

# bench/offload: quantize-on-offload (fp8, int8, int4) against the raw mover, same run.
if(KVTIER_HAVE_CUDA)
  add_executable(bench_offload ${CMAKE_CURRENT_LIST_DIR}/offload_transfer.cpp)
  target_link_libraries(bench_offload PRIVATE kvtier_copy_core kvtier_flags)
  set_target_properties(bench_offload PROPERTIES OUTPUT_NAME offload
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endif()

# bench/peer: GPU to GPU block copies (the peer copier against one contiguous
# cudaMemcpyPeer) and the prefill -> decode handoff; needs two GPUs.
if(KVTIER_HAVE_CUDA)
  add_executable(bench_peer ${CMAKE_CURRENT_LIST_DIR}/peer_transfer.cpp)
  target_link_libraries(bench_peer PRIVATE kvtier_copy_core kvtier_model_cuda kvtier_flags)
  set_target_properties(bench_peer PROPERTIES OUTPUT_NAME peer
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endif()
