# -DKVTIER_PRECOMPILE_HEADERS=ON: the heavy library headers (CAF, fmt,
# GoogleTest and the standard headers kvtier uses most) are parsed once per
# build instead of once per translation unit. scripts/setup.sh turns it on;
# docs/building.md has the measurements.
#
# kvtier_precompile_headers() runs after every folder is added and walks every
# target of the build tree, so a new folder or target gets it without asking.
# A target takes part when it links kvtier_flags (kvtier's own C++ code) and
# has no CUDA sources and no compile options of its own (a precompiled header
# is only valid for the flags it was built with). A target that defines a
# macro these headers read would fail with -Winvalid-pch: it opts out with
# set_target_properties(<target> PROPERTIES DISABLE_PRECOMPILE_HEADERS ON).
# A target reuses the header of a small kvtier_pch_<kind> object library with
# the same flags; the kind follows from what the target links:
#   gtest       GoogleTest, no CAF (kernels/' tests)
#   caf         caf::core (through runtime/): CAF's error and expected, fmt
#   caf_gtest   both
# and a _pic suffix for position-independent code (the Python extension's
# libraries). A library whose users compile with options of its own (TOML++'s
# -DTOML_SHARED_LIB=1, hiredis's -D_FILE_OFFSET_BITS=64) adds its name to the
# kind, and that header is built with those options too: GCC refuses a header
# built with other macros than the source's. A source with options of its own
# (io/checksum_avx2.cpp: -mavx2) is left out.
#
# Invariant: a source compiles the same with and without it. The precompiled
# header only adds includes in front of a source; each source still includes
# what it uses, which a build without the option (the default) checks.
option(KVTIER_PRECOMPILE_HEADERS "Precompile CAF, fmt and GoogleTest headers (faster full builds)" OFF)

# ccache caches a source compiled with a precompiled header only when told
# that the header's macros and __TIME__ may be trusted; without it every such
# compile is a miss. The launcher passes that on, keeping the user's own
# sloppiness settings.
if(KVTIER_PRECOMPILE_HEADERS)
  foreach(lang C CXX)
    if(CMAKE_${lang}_COMPILER_LAUNCHER MATCHES "(^|/)ccache$")
      execute_process(COMMAND ${CMAKE_${lang}_COMPILER_LAUNCHER} --get-config sloppiness
        OUTPUT_VARIABLE kvtier_ccache_sloppiness OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      string(REPLACE " " "" kvtier_ccache_sloppiness "${kvtier_ccache_sloppiness},pch_defines,time_macros")
      string(REGEX REPLACE "^," "" kvtier_ccache_sloppiness "${kvtier_ccache_sloppiness}")
      set(CMAKE_${lang}_COMPILER_LAUNCHER env CCACHE_SLOPPINESS=${kvtier_ccache_sloppiness}
        ${CMAKE_${lang}_COMPILER_LAUNCHER})
    endif()
  endforeach()
endif()

set(kvtier_pch_std_headers
  <algorithm> <array> <chrono> <cmath> <cstddef> <cstdint> <cstring> <functional> <limits> <map>
  <memory> <optional> <span> <string> <string_view> <unordered_map> <utility> <vector>)
set(kvtier_pch_caf_headers <caf/error.hpp> <caf/expected.hpp> <fmt/format.h>)
set(kvtier_pch_gtest_headers <gtest/gtest.h>)

# Every target defined in directory `dir` and below, into `out`.
function(kvtier_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    kvtier_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The targets whose usage requirements (flags, definitions, include
# folders) `target` compiles with: itself, what it links, and what those pass
# on in their interface, into `out`. Link-only dependencies ($<LINK_ONLY:...>)
# and other generator expressions are not followed: they add no flags.
function(kvtier_usage_closure target out)
  set(seen)
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(t IN_LIST seen)
      continue()
    endif()
    if(NOT TARGET ${t})
      # An imported target of a folder's own (pkg_check_modules in remote/)
      # is not visible here: its options are unknown, so it is recorded as
      # such and the caller leaves the target out.
      if(t MATCHES "::")
        list(APPEND seen ${t})
      endif()
      continue()
    endif()
    list(APPEND seen ${t})
    set(links)
    get_target_property(type ${t} TYPE)
    if(t STREQUAL target AND NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${t} LINK_LIBRARIES)
    else()
      get_target_property(links ${t} INTERFACE_LINK_LIBRARIES)
    endif()
    foreach(l IN LISTS links)
      if(l MATCHES "^\\$<")
        continue()
      endif()
      if(TARGET ${l})
        get_target_property(aliased ${l} ALIASED_TARGET)
        if(aliased)
          set(l ${aliased})
        endif()
        list(APPEND todo ${l})
      elseif(l MATCHES "::")
        list(APPEND todo ${l})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The object library whose precompiled header targets of `kind` reuse;
# `foreign` are the libraries that bring compile options of their own.
function(kvtier_pch_target kind pic foreign out)
  set(name kvtier_pch_${kind})
  foreach(dep IN LISTS foreign)
    string(REGEX REPLACE "^.*::" "" dep_name ${dep})
    string(MAKE_C_IDENTIFIER ${dep_name} dep_name)
    string(TOLOWER ${dep_name} dep_name)
    string(APPEND name _${dep_name})
  endforeach()
  if(pic)
    string(APPEND name _pic)
  endif()
  if(NOT TARGET ${name})
    set(headers ${kvtier_pch_std_headers})
    set(links kvtier_flags)
    if(kind MATCHES "^caf")
      list(APPEND headers ${kvtier_pch_caf_headers})
      list(APPEND links caf::core fmt::fmt)
    endif()
    if(kind MATCHES "gtest$")
      list(APPEND headers ${kvtier_pch_gtest_headers})
      list(APPEND links GTest::gtest)
    endif()
    set(source ${PROJECT_BINARY_DIR}/generated/kvtier_pch.cpp)
    if(NOT EXISTS ${source})
      file(WRITE ${source} "// The precompiled header's own translation unit: nothing of its own.\n")
    endif()
    add_library(${name} OBJECT ${source})
    target_link_libraries(${name} PRIVATE ${links} ${foreign})
    target_precompile_headers(${name} PRIVATE ${headers})
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ${pic})
  endif()
  set(${out} ${name} PARENT_SCOPE)
endfunction()

function(kvtier_precompile_headers)
  if(NOT KVTIER_PRECOMPILE_HEADERS)
    return()
  endif()
  # GCC 12 reports std::string's operator+ as a memcpy out of bounds (the
  # -Wrestrict false positive's sibling) in some tests once the standard
  # headers come from a precompiled header; it stays a warning there. The
  # default build (no precompiled headers) keeps it an error.
  # A header GCC cannot use is a warning, not a failed build: the source is
  # compiled without it (slower, still right).
  target_compile_options(kvtier_flags INTERFACE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=array-bounds>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=invalid-pch>)
  kvtier_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(applied 0)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(own_options ${t} COMPILE_OPTIONS)
    get_target_property(disabled ${t} DISABLE_PRECOMPILE_HEADERS)
    get_target_property(sources ${t} SOURCES)
    if(own_options OR disabled OR sources MATCHES "\\.cu(;|$)")
      continue()
    endif()
    kvtier_usage_closure(${t} closure)
    if(NOT kvtier_flags IN_LIST closure)
      continue()
    endif()
    # Libraries whose users compile with options of its own (pkg-config
    # cflags such as hiredis's -D_FILE_OFFSET_BITS=64, TOML++'s
    # -DTOML_SHARED_LIB=1): the header is built with them too, since GCC
    # refuses a header built with other macros.
    set(foreign)
    set(unknown OFF)
    foreach(dep IN LISTS closure)
      if(NOT TARGET ${dep})
        set(unknown ON)
      elseif(NOT dep MATCHES "^(kvtier_flags|caf::core|fmt::fmt|GTest::gtest)$")
        get_target_property(dep_options ${dep} INTERFACE_COMPILE_OPTIONS)
        if(dep_options)
          list(APPEND foreign ${dep})
        endif()
      endif()
    endforeach()
    list(SORT foreign)
    if(unknown)
      continue()
    endif()
    if(caf::core IN_LIST closure)
      set(kind caf)
    else()
      set(kind "")
    endif()
    if(GTest::gtest IN_LIST closure)
      if(kind)
        string(APPEND kind _gtest)
      else()
        set(kind gtest)
      endif()
    endif()
    if(NOT kind)
      continue()
    endif()
    get_target_property(pic ${t} POSITION_INDEPENDENT_CODE)
    if(NOT pic)
      set(pic OFF)
    endif()
    kvtier_pch_target(${kind} ${pic} "${foreign}" pch)
    target_precompile_headers(${t} REUSE_FROM ${pch})
    get_target_property(source_dir ${t} SOURCE_DIR)
    foreach(s IN LISTS sources)
      cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${source_dir})
      get_property(source_options SOURCE ${s} TARGET_DIRECTORY ${t} PROPERTY COMPILE_OPTIONS)
      if(source_options)
        set_property(SOURCE ${s} TARGET_DIRECTORY ${t} PROPERTY SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
    math(EXPR applied "${applied} + 1")
  endforeach()
  message(STATUS "kvtier: precompiled headers for ${applied} targets")
endfunction()
