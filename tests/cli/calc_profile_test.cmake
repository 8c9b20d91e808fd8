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
