# Quantization tests: the CPU twin (formats, exact cases, error bounds), and,
# when the build has CUDA, a plain executable that checks the CUDA kernels
# against the CPU twin byte for byte (exit 77 = skipped: no GPU here).
if(NOT KVTIER_GPU_ONLY) # cross-checks sizes against runtime/dtype (kvtier_runtime)
  kvtier_test(test_quant
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_test.cpp
    LIBS kvtier_quant kvtier_runtime)
endif()
if(KVTIER_HAVE_CUDA)
  add_executable(quant_cuda_check ${CMAKE_CURRENT_LIST_DIR}/quant_cuda_check.cpp)
  target_link_libraries(quant_cuda_check PRIVATE kvtier_quant_cuda kvtier_flags)
  add_test(NAME kernels.quant_cuda_matches_cpu COMMAND quant_cuda_check)
  set_tests_properties(kernels.quant_cuda_matches_cpu PROPERTIES SKIP_RETURN_CODE 77)
endif()
