# A copied kvtier runs its defaults with no source or build tree: the default
# config and the bundled trace are inside the binary.
# -DKVTIER=<binary> -DWORK=<scratch folder>
include(${CMAKE_CURRENT_LIST_DIR}/cli_test_util.cmake)
fresh_dir(${WORK}/bin)
file(COPY ${KVTIER} DESTINATION ${WORK}/bin)
get_filename_component(name ${KVTIER} NAME)
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=KVTIER_DATA_DIR --unset=KVTIER_SOURCE_DIR
                        ${WORK}/bin/${name} sim --max-requests 20 --quiet --json-out report.json
                WORKING_DIRECTORY ${WORK}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 300)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "a copied kvtier failed (${rc}): ${err}")
endif()
file(READ ${WORK}/report.json report)
string(JSON trace GET "${report}" trace)
string(JSON total GET "${report}" requests_total)
if(NOT trace STREQUAL "<built-in>/sim/traces/mooncake_conversation_trace.jsonl")
  message(FATAL_ERROR "the default trace must come from inside the binary, came from: ${trace}")
endif()
if(NOT total EQUAL 20)
  message(FATAL_ERROR "requests_total: expected 20, got ${total}")
endif()
file(REMOVE_RECURSE ${WORK})
