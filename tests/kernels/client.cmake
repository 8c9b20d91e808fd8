# With CUDA and kvtierd's client library: client_cuda_check, a CUDA client of
# kvtierd (region registered with cudaHostRegister, KV moved HBM <-> region by
# DMA, every byte compared). It needs a running kvtierd, so it is not a ctest
# entry; scripts/gpu-check.sh runs it against one when KVTIERD names a binary.
if(KVTIER_HAVE_CUDA AND TARGET kvtier_client)
  add_executable(client_cuda_check ${CMAKE_CURRENT_LIST_DIR}/client_cuda_check.cpp)
  target_link_libraries(client_cuda_check PRIVATE kvtier_client CUDA::cudart kvtier_flags)
endif()
