# Flags for kvtier's own C++ code: warnings are errors; optional sanitizers.
add_library(kvtier_flags INTERFACE)
target_compile_options(kvtier_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Werror -Wno-missing-field-initializers>
  # GCC 12 at -O3 reports std::string appends as overlapping memcpy (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
if(KVTIER_SANITIZE)
  target_compile_options(kvtier_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(kvtier_flags INTERFACE -fsanitize=address,undefined)
endif()
if(KVTIER_TSAN)
  if(KVTIER_SANITIZE)
    message(FATAL_ERROR "KVTIER_TSAN and KVTIER_SANITIZE exclude each other: use two build directories")
  endif()
  target_compile_options(kvtier_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>)
  target_link_options(kvtier_flags INTERFACE -fsanitize=thread)
endif()

# kvtier_test(NAME SOURCES... LIBS ...): one gtest binary, each TEST a ctest entry.
function(kvtier_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main kvtier_flags)
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "KVTIER_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
