# Helpers for the CLI tests: run kvtier as a user would and check exit codes
# and messages exactly. Every run has a generous TIMEOUT so a hang fails the
# test instead of stalling the suite (no timing is asserted).

# kvtier_run(<out-prefix> ARGS...): sets <prefix>_rc, <prefix>_out, <prefix>_err.
function(kvtier_run prefix)
  execute_process(COMMAND ${KVTIER} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 300)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
endfunction()

# expect_failure(<prefix> <expected stderr substring>): a non-zero exit code
# (not a crash or timeout) and the message.
function(expect_failure prefix expected)
  set(rc "${${prefix}_rc}")
  set(err "${${prefix}_err}")
  if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0 OR rc GREATER 125)
    message(FATAL_ERROR "${prefix}: expected a clean non-zero exit, got '${rc}'; stderr: ${err}")
  endif()
  string(FIND "${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${prefix}: expected stderr to contain\n  ${expected}\ngot\n  ${err}")
  endif()
endfunction()

function(expect_success prefix)
  if(NOT "${${prefix}_rc}" STREQUAL "0")
    message(FATAL_ERROR "${prefix}: expected exit 0, got '${${prefix}_rc}'; stderr: ${${prefix}_err}")
  endif()
endfunction()

# A fresh, empty scratch folder.
function(fresh_dir dir)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
endfunction()
