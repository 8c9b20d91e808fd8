# The kvtier command as a careless user runs it: every bad flag or value is a
# clear error naming the flag, with a non-zero exit, before any work is done.
# Each case: arguments, then a regular expression stderr must match.
set(work ${CMAKE_CURRENT_BINARY_DIR}/bad_flags_work)
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work}/a_directory)
file(WRITE ${work}/synthetic.toml "[sim]\ntrace_format = \"synthetic\"\nmax_requests = 7\n[sim.synthetic]\nrequests = 1000\nrate_per_s = 5\ninput = 64\noutput = 4\n")
file(WRITE ${work}/predictor.toml "[cache]\npolicy = \"predictor\"\n[tiers.dram]\ncapacity = \"1GB\"\n[sim]\nmax_requests = 20\n")
file(WRITE ${work}/exclusive.toml "[cache]\nhierarchy = \"exclusive\"\n[sim]\nmax_requests = 20\n")
file(WRITE ${work}/offload.toml "[model]\ndtype = \"int8\"\n[tiers.nvme]\nenabled = false\n[tiers.dram]\ncapacity = \"1GB\"\n[compression]\noffload_dtype = \"int8\"\n")

function(expect_error regex)
  execute_process(COMMAND ${KVTIER} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                  TIMEOUT 120)
  if(rc EQUAL 0 OR NOT err MATCHES "${regex}")
    message(FATAL_ERROR "kvtier ${ARGN}: expected a non-zero exit and an error matching '${regex}'; got rc=${rc}\nstderr: ${err}\nstdout: ${out}")
  endif()
endfunction()

expect_error("--hbm 1000TB: expected at most" sim --hbm 1000TB --max-requests 1)
expect_error("--hbm 1B: expected room for at least one" sim --hbm 1B --max-requests 1)
expect_error("--hbm 0: expected \"auto\"" sim --hbm 0 --max-requests 1)
expect_error("--dram auto: \"auto\" is only for --hbm" sim --dram auto --max-requests 1)
expect_error("--time-scale nan: expected a finite number" sim --time-scale nan)
expect_error("--time-scale -1: expected a number in" sim --time-scale -1)
expect_error("--time-scale 0: expected a number in" sim --time-scale 0)
expect_error("--max-requests -1: expected a whole number" sim --max-requests -1)
expect_error("--format csv: expected one of" sim --format csv)
expect_error("--unbounded needs --cache-only" sim --unbounded --max-requests 1)
expect_error("--steps-csv needs a timed run" sim --cache-only --steps-csv ${work}/steps.csv)
expect_error("past the simulator's limit of" sim --time-scale 1000000 --cache-only)
expect_error("config file is a directory, not a file" sim ${work}/a_directory)
expect_error("config file is not a regular file" sim /dev/zero)
expect_error("--device bogus: expected auto, cuda or cpu" run ${work}/synthetic.toml --device bogus)
expect_error("--compute-scale nan: expected a number" run ${work}/synthetic.toml --compute-scale nan)
expect_error("offload_dtype: \"int8\": the real engine quantizes fp16 or bf16 blocks on offload, but the KV cache is int8" run ${work}/offload.toml)
expect_error("--context: '99999999999999999999k' is too large" calc --context 99999999999999999999k)
expect_error("--hbm: expected a size in" calc --hbm 1B)
expect_error("--weights-dtype: int4_row is a KV layout, not a weights format: 'int4_row'; expected fp16, bf16, fp8, int8 or int4" calc --weights-dtype int4_row)
expect_error("--out: cannot write /dev/full" calibrate --no-measure --out /dev/full)
expect_error("--json-out: cannot write /dev/full" sim --cache-only --max-requests 5 --json-out /dev/full)
# Timed runs take every policy but the oracle, which knows the future.
file(WRITE ${work}/oracle.toml "[cache]\npolicy = \"oracle\"\n[tiers.dram]\ncapacity = \"1GB\"\n[sim]\nmax_requests = 20\n")
expect_error("policy = \"oracle\" knows the future" sim ${work}/oracle.toml)
expect_error("policy = \"oracle\" knows the future" run ${work}/oracle.toml)
expect_error("--against-lru needs a timed run" sim --cache-only --against-lru)
# A timed run under a policy, against its LRU twin: the TTFT change is measured.
execute_process(COMMAND ${KVTIER} sim ${work}/predictor.toml --against-lru OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc EQUAL 0 OR NOT out MATCHES "policy predictor \\(inclusive\\) in the block manager.*LRU \\(the LRU twin\\)"
   OR NOT out MATCHES "TTFT against LRU +p50 [0-9.]+ ms against LRU's [0-9.]+ \\([-+][0-9.]+%\\)")
  message(FATAL_ERROR "kvtier sim predictor.toml --against-lru: rc=${rc}: ${err}${out}")
endif()
# The exclusive hierarchy runs in the block manager: timed runs take it.
execute_process(COMMAND ${KVTIER} sim ${work}/exclusive.toml OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier sim exclusive.toml: rc=${rc}: ${err}${out}")
endif()

# A cache-only run reports the policy's standing through each tier.
execute_process(COMMAND ${KVTIER} sim ${work}/predictor.toml --cache-only --json-out ${work}/predictor.json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc EQUAL 0 OR NOT out MATCHES "policy predictor \\(inclusive\\), through each tier")
  message(FATAL_ERROR "kvtier sim predictor.toml --cache-only: rc=${rc}: ${err}${out}")
endif()
file(READ ${work}/predictor.json json)
string(JSON belady GET "${json}" policy tiers hbm belady_hit_ratio_through)
string(JSON looked_up GET "${json}" policy prefix_blocks_looked_up)
if(NOT looked_up GREATER 0 OR belady LESS 0)
  message(FATAL_ERROR "predictor.json: expected the policy standing, got ${json}")
endif()

# [sim] max_requests applies to a synthetic trace.
execute_process(COMMAND ${KVTIER} sim ${work}/synthetic.toml --cache-only --json-out ${work}/synthetic.json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier sim synthetic.toml: rc=${rc}: ${err}")
endif()
file(READ ${work}/synthetic.json json)
string(JSON requests GET "${json}" requests)
if(NOT requests EQUAL 7)
  message(FATAL_ERROR "synthetic trace with max_requests = 7: expected 7 requests, got ${requests}")
endif()

# calibrate --no-measure writes --out.
execute_process(COMMAND ${KVTIER} calibrate --no-measure --out ${work}/profile.toml RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${work}/profile.toml)
  message(FATAL_ERROR "calibrate --no-measure --out: rc=${rc}, file written: ${err}")
endif()
