# `kvtier eval-quality` as a user meets its errors: a checkpoint folder that
# is not there, and held-out text that is not there, each named by its flag,
# exit code 2, nothing measured.
execute_process(COMMAND ${KVTIER} eval-quality --model-dir ${WORK_DIR}/no-such-model --text ${WORK_DIR}/none.txt
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "eval-quality: --model-dir: .*no-such-model")
  message(FATAL_ERROR "a missing checkpoint must fail naming --model-dir; got rc=${rc}: ${err}")
endif()
execute_process(COMMAND ${KVTIER} eval-quality --text ${WORK_DIR}/none.txt ERROR_VARIABLE err2 RESULT_VARIABLE rc2)
if(rc2 EQUAL 0 OR NOT err2 MATCHES "--model-dir")
  message(FATAL_ERROR "eval-quality without --model-dir must be refused; got rc=${rc2}: ${err2}")
endif()
