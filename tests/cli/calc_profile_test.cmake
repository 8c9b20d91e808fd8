# `kvtier calc --profile`: the latency table for tiny-test on a made-up GPU
# (tiny_gpu_profile.toml), every figure worked out by hand from the cost model:
#   tiny-test: 1e6 parameters (bf16: 2e6 B of weights), 2 layers, 4 query heads,
#   2 KV heads, head_dim 8: 128 B of fp16 KV per token, 2048 B per 16-token block.
#   step = 100 us + max(FLOPs / 1e12, bytes / 100e9);
#   FLOPs = 2e6 * new + 256 * attention pairs; bytes = 2e6 + 128 * (read + new).
#   1,024 tokens: 64 blocks = 131,072 B; budget 1e9 - 2e6 = 998e6 B: 7614 fit.
#   prefill in 2 chunks of 512: 1.157619968 + 1.224728832 = 2.382 ms
#   decode, one: 100 us + (2e6 + 128 * 1025) / 100e9 = 0.121 ms (memory-bound)
#   decode, 7614: 100 us + (2e6 * 7614 + 256 * 7614 * 1025) / 1e12 = 17.326 ms,
#   7614 / 17.3259136 ms = 439457.3 tokens/s
set(profile ${SOURCE}/tests/cli/tiny_gpu_profile.toml)
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${profile} --contexts 1k --prefill-chunk 512
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier calc --profile exited ${rc}: ${err}")
endif()
set(expected "    1,024   128.00 KiB   7614        2.382        0.121       17.326       439457")
string(FIND "${out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "expected the row\n${expected}\ngot\n${out}")
endif()
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${profile} --contexts 1k,4096 --prefill-chunk 512
                        --json OUTPUT_VARIABLE json RESULT_VARIABLE rc)
string(JSON rows LENGTH "${json}" rows)
string(JSON fit GET "${json}" rows 0 requests_that_fit)
string(JSON bytes GET "${json}" rows 0 kv_bytes_per_request)
string(JSON budget GET "${json}" kv_budget_bytes)
string(JSON fit4k GET "${json}" rows 1 requests_that_fit)
if(NOT rows EQUAL 2 OR NOT fit EQUAL 7614 OR NOT bytes EQUAL 131072 OR NOT budget EQUAL 998000000
   OR NOT fit4k EQUAL 1903)
  message(FATAL_ERROR "--json: expected 2 rows, 7614 fit, 131072 B, budget 998000000, 1903 fit at 4k; got ${json}")
endif()
# The profile sets GPU memory: --hbm alongside it is refused, not ignored.
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${profile} --hbm 80GB
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "--hbm and --reserve are the profile's")
  message(FATAL_ERROR "--hbm with --profile must fail; got rc=${rc}: ${err}")
endif()
# The same with a measured forward for tiny-test: the cost model takes it, not the roofline.
#   prefill 2 x 512: dense(512) = 0.1 + 511/1023 ms each; attention 256 * pairs / 1e12:
#     pairs 512 * 256.5 = 131,328 and 512 * 768.5 = 393,472: 1.3333712829 ms
#   decode, one: 0.1 ms + 128 * 1025 B / 1e9 B/s = 0.2312 ms
#   decode, 7614: 0.1 + 7613/1023 ms + 7614 * 131,200 B / 1e9 = 1006.4986377 ms
set(measured ${SOURCE}/tests/cli/tiny_gpu_measured.toml)
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${measured} --contexts 1k --prefill-chunk 512 --json
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier calc with a measured forward exited ${rc}: ${err}")
endif()
string(JSON model GET "${json}" compute_model)
string(JSON prefill GET "${json}" rows 0 prefill_ms)
string(JSON one GET "${json}" rows 0 decode_ms_one)
string(JSON full GET "${json}" rows 0 decode_ms_full)
if(NOT model STREQUAL "measured forward (tiny-test)" OR NOT prefill MATCHES "^1\\.33337128" OR NOT one MATCHES "^0\\.231(2|199)"
   OR NOT full MATCHES "^1006\\.49863")
  message(FATAL_ERROR "measured forward: expected prefill 1.33337128, decode 0.2312 and 1006.49863 ms; got ${model}, ${prefill}, ${one}, ${full}")
endif()
# A measurement of another model is not used.
file(READ ${measured} text)
string(REPLACE "model = \"tiny-test\"" "model = \"another-model\"" text "${text}")
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/other_model.toml "${text}")
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${WORK}/other_model.toml --contexts 1k --json
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier calc with another model's measurement exited ${rc}: ${err}")
endif()
string(JSON model GET "${json}" compute_model)
if(NOT model STREQUAL "roofline")
  message(FATAL_ERROR "a [compute] measured for another model must not time tiny-test; got ${model}")
endif()
# `kvtier calibrate --compute` on the model's CPU twin writes a profile whose
# [compute] times that model (the values are timings: only their shape is checked).
execute_process(COMMAND ${KVTIER} calibrate --compute --config ${SOURCE}/configs/real-model-cpu.toml --device cpu
                        --repeats 1 --out ${WORK}/calibrated.toml
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT err MATCHES "model \\(cpu\\): fit mean \\|error\\|")
  message(FATAL_ERROR "kvtier calibrate --compute --device cpu exited ${rc}: ${err}")
endif()
file(READ ${WORK}/calibrated.toml text)
if(NOT text MATCHES "\n\\[compute\\][^\n]*\nmodel = \"tiny-test\"\ndense_tokens = \\[1, 2, 4, 8, 16, 32, 64\\]\ndense_ms = \\[")
  message(FATAL_ERROR "expected a [compute] table for tiny-test with knots 1..64; got\n${text}")
endif()
execute_process(COMMAND ${KVTIER} calc --model tiny-test --profile ${WORK}/calibrated.toml --contexts 1k --json
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier calc with the calibrated profile exited ${rc}: ${err}")
endif()
string(JSON model GET "${json}" compute_model)
if(NOT model STREQUAL "measured forward (tiny-test)")
  message(FATAL_ERROR "the calibrated profile must time tiny-test; got ${model}")
endif()
execute_process(COMMAND ${KVTIER} calibrate --compute ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "--compute needs --config FILE")
  message(FATAL_ERROR "--compute without --config must fail naming --config; got rc=${rc}: ${err}")
endif()
execute_process(COMMAND ${KVTIER} calibrate --compute --config ${SOURCE}/configs/default.toml
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "default.toml: \\[compute\\] kind must be \"model\"")
  message(FATAL_ERROR "--compute on a modeled config must fail naming [compute] kind; got rc=${rc}: ${err}")
endif()
