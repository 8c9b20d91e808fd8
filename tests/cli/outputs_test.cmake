# Every output kvtier writes is checked: a full disk or a missing folder is a
# clear error with a non-zero exit, never a lost report behind exit 0.
# -DKVTIER=<binary> -DWORK=<scratch folder> -DSOURCE=<source dir>
include(${CMAKE_CURRENT_LIST_DIR}/cli_test_util.cmake)
fresh_dir(${WORK})

kvtier_run(json_full sim --max-requests 20 --quiet --json-out /dev/full)
expect_failure(json_full "kvtier sim: --json-out: cannot write /dev/full: No space left on device")
kvtier_run(json_missing sim --max-requests 20 --quiet --json-out ${WORK}/no/such/folder/report.json)
expect_failure(json_missing "kvtier sim: --json-out: cannot write ${WORK}/no/such/folder/report.json: No such file or directory")
kvtier_run(json_dir sim --max-requests 20 --quiet --json-out ${WORK})
expect_failure(json_dir "kvtier sim: --json-out: cannot write ${WORK}: Is a directory")
kvtier_run(csv_full sim --max-requests 20 --quiet --steps-csv /dev/full)
expect_failure(csv_full "kvtier sim: --steps-csv: cannot write /dev/full: No space left on device")
kvtier_run(chrome_full sim --max-requests 20 --quiet --chrome-trace /dev/full)
expect_failure(chrome_full "kvtier sim: --chrome-trace: cannot write /dev/full: No space left on device")
kvtier_run(cache_full sim --max-requests 20 --cache-only --json-out /dev/full)
expect_failure(cache_full "kvtier sim: --json-out: cannot write /dev/full: No space left on device")

# A report that does get written is whole.
kvtier_run(json_ok sim --max-requests 20 --quiet --json-out ${WORK}/report.json)
expect_success(json_ok)
file(READ ${WORK}/report.json report)
string(JSON total GET "${report}" requests_total)
if(NOT total EQUAL 20)
  message(FATAL_ERROR "requests_total: expected 20, got ${total}")
endif()
# ... with the Belady bound for the run's memory (608 of 18,127 blocks: every repeat) and LRU's standing.
string(JSON belady GET "${report}" policy tiers hbm belady_hit_ratio_through)
string(JSON lru_hit GET "${report}" policy tiers hbm lru_hit_ratio_through)
string(JSON hit GET "${report}" policy tiers hbm hit_ratio_through)
if(NOT belady MATCHES "^0\\.03354112649638" OR NOT lru_hit STREQUAL hit)
  message(FATAL_ERROR "policy standing: Belady ${belady} (expected 0.0335411264963866), hit ${hit}, LRU ${lru_hit}")
endif()

# Standard output into a full disk.
execute_process(COMMAND ${KVTIER} calc OUTPUT_FILE /dev/full ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 300)
set(stdout_full_rc "${rc}")
set(stdout_full_err "${err}")
expect_failure(stdout_full "kvtier: cannot write the standard output: No space left on device")

# calibrate --no-measure writes to --out (it used to print and ignore it).
kvtier_run(profile calibrate --no-measure --profile h200 --out ${WORK}/profile.toml)
expect_success(profile)
if(NOT profile_out STREQUAL "")
  message(FATAL_ERROR "calibrate --out: expected nothing on stdout, got: ${profile_out}")
endif()
file(READ ${WORK}/profile.toml profile_text)
string(FIND "${profile_text}" "# Hardware profile \"h200\", rewritten by `kvtier calibrate --no-measure`." at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "calibrate --out wrote: ${profile_text}")
endif()
kvtier_run(profile_full calibrate --no-measure --out /dev/full)
expect_failure(profile_full "kvtier calibrate: --out: cannot write /dev/full: No space left on device")

kvtier_run(eval_full eval-compression ${SOURCE}/tests/compression/eval_tiny.toml --json-out /dev/full)
expect_failure(eval_full "kvtier eval-compression: --json-out: cannot write /dev/full: No space left on device")
file(REMOVE_RECURSE ${WORK})
