# `kvtier nvme` on folders it cannot use and calibrations it cannot run: each a
# clear error and a non-zero exit, never an uncaught exception or a hang.
# -DKVTIER=<binary> -DWORK=<scratch folder>
include(${CMAKE_CURRENT_LIST_DIR}/cli_test_util.cmake)
fresh_dir(${WORK})
file(WRITE ${WORK}/a-file "not a folder\n")

kvtier_run(under_file nvme --dir ${WORK}/a-file/nvme)
expect_failure(under_file "kvtier nvme: --dir ${WORK}/a-file/nvme: cannot create the folder: Not a directory")
kvtier_run(in_proc nvme --dir /proc/kvtier-nvme)
expect_failure(in_proc "kvtier nvme: --dir /proc/kvtier-nvme: cannot create the folder: ")
kvtier_run(engine nvme --dir ${WORK}/nvme --engine aio)
expect_failure(engine "kvtier nvme: --engine: expected auto, io_uring or threads, got \"aio\"")

# 64 MiB holds 31 slots of 2 MiB: fewer than the 32 pages kept in flight.
kvtier_run(small_file nvme --dir ${WORK}/nvme --calibrate --file-size 64MiB)
expect_failure(small_file "kvtier nvme: calibration: a 64.00 MiB file holds 31 slots of 2.00 MiB, fewer than the queue depth 32")
foreach(seconds -1 0 nan inf 1e300)
  kvtier_run(seconds_${seconds} nvme --dir ${WORK}/nvme --calibrate --seconds ${seconds})
  expect_failure(seconds_${seconds} "kvtier nvme: --seconds: expected seconds in (0, 86400], got")
endforeach()
kvtier_run(qd0 nvme --dir ${WORK}/nvme --calibrate --queue-depth 0)
expect_failure(qd0 "kvtier nvme: --queue-depth: expected 1..4096, got 0")
file(REMOVE_RECURSE ${WORK})
