# `cmake --install` and find_package(kvtier): the binaries (kvtier, kvtierd),
# the client library (kvtier::client: sockets and shared memory only) and the
# in-process stack an application embeds (kvtier::sim: the actor graph on the
# simulated backend, with kvtier::runtime's data model and config).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(kvtier_exported kvtier_flags kvtier_client kvtier_runtime kvtier_quant kvtier_compression kvtier_actors
    kvtier_run kvtier_traces kvtier_cache kvtier_sim)
foreach(t IN LISTS kvtier_exported)
  string(REPLACE "kvtier_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})
endforeach()
install(TARGETS ${kvtier_exported} EXPORT kvtierTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvtier)
install(TARGETS kvtier kvtierd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Headers keep their folder: an application includes "client/client.hpp",
# "sim/simulation.hpp", as kvtier's own sources do.
foreach(dir IN ITEMS client runtime actors run sim cache compression kernels/quant)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvtier/${dir}
    FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/kvtier/build_info.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvtier/kvtier)
install(FILES ${PROJECT_SOURCE_DIR}/configs/daemon.toml DESTINATION ${CMAKE_INSTALL_DATADIR}/kvtier)
install(EXPORT kvtierTargets NAMESPACE kvtier:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvtier)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvtierConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvtierConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvtier)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvtierConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvtierConfig.cmake ${PROJECT_BINARY_DIR}/kvtierConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvtier)
