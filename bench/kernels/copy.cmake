# bench/transfer: the HBM <-> DRAM engine against plain CUDA copies in the
# same run (needs a GPU; built only with CUDA). Output: build/bench/transfer.
if(KVTIER_HAVE_CUDA)
  add_executable(bench_transfer ${CMAKE_CURRENT_LIST_DIR}/copy_transfer.cpp)
  target_link_libraries(bench_transfer PRIVATE kvtier_copy_core kvtier_flags)
  set_target_properties(bench_transfer PROPERTIES OUTPUT_NAME transfer
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endif()
