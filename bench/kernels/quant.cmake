# bench_quant: quantize / dequantize throughput against a copy of the same
# bytes in the same run: the CPU twin against memcpy always, the CUDA
# kernels against a device-to-device copy when built with CUDA and a GPU is there.
add_executable(bench_quant ${CMAKE_CURRENT_LIST_DIR}/bench_quant.cpp)
target_link_libraries(bench_quant PRIVATE kvtier_quant kvtier_flags)
if(KVTIER_HAVE_CUDA)
  target_link_libraries(bench_quant PRIVATE kvtier_quant_cuda)
endif()
set_target_properties(bench_quant PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
