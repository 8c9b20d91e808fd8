# Inputs an unlucky user hands kvtier: a folder or a device as the trace, a
# time scale the clock cannot hold, a context whose bytes overflow, and the
# messages of `kvtier run`.
# -DKVTIER=<binary> -DWORK=<scratch folder> -DSOURCE=<source dir>
include(${CMAKE_CURRENT_LIST_DIR}/cli_test_util.cmake)
fresh_dir(${WORK})

kvtier_run(trace_dir sim --trace ${WORK} --quiet)
expect_failure(trace_dir
  "kvtier sim: ${WORK}: cannot open trace: it is a directory (traces are read from regular files or pipes)")
kvtier_run(trace_zero sim --trace /dev/zero --quiet)
expect_failure(trace_zero
  "kvtier sim: /dev/zero: cannot open trace: it is a character device (traces are read from regular files or pipes)")

# The bundled trace spans three hours: at 1e6 its last arrival is 1.08e10 s.
kvtier_run(time_scale sim --time-scale 1e6 --quiet)
expect_failure(time_scale "at time_scale 1e+06 that is ")
expect_failure(time_scale "past the simulator's limit of 1e+09 s (about 32 years)")

kvtier_run(calc_context calc --context 100000000000000000)
expect_failure(calc_context "kvtier calc: --context: expected 1..4,294,967,296 tokens")
kvtier_run(run_missing run ${WORK}/missing.toml)
expect_failure(run_missing "kvtier run: ")
string(FIND "${run_missing_err}" "kvtier sim:" sim_at)
if(NOT sim_at EQUAL -1)
  message(FATAL_ERROR "kvtier run must not speak as kvtier sim: ${run_missing_err}")
endif()
kvtier_run(run_trace_dir run ${SOURCE}/configs/real-cpu.toml --trace ${WORK} --quiet)
expect_failure(run_trace_dir "kvtier run: ${WORK}: cannot open trace: it is a directory")
file(REMOVE_RECURSE ${WORK})
