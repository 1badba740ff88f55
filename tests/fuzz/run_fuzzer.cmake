# Runs one libFuzzer target for a bounded time (ctest, label fuzz).
#   cmake -DFUZZER=<exe> -DSEEDS=<seed dir> -DSCRATCH=<corpus copy>
#         -DARTIFACTS=<dir> -DSECONDS=<n> -DINPUT_TIMEOUT=<n> -P run_fuzzer.cmake
# The seeds are copied so that the inputs libFuzzer adds go to the build
# tree; the copy is rebuilt on every run.
foreach(var FUZZER SEEDS SCRATCH ARTIFACTS SECONDS INPUT_TIMEOUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${var}= is required")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${SEEDS}")
  message(FATAL_ERROR "no seed corpus at ${SEEDS}")
endif()
file(REMOVE_RECURSE "${SCRATCH}")
file(MAKE_DIRECTORY "${SCRATCH}" "${ARTIFACTS}")
file(GLOB seeds "${SEEDS}/*")
file(COPY ${seeds} DESTINATION "${SCRATCH}")

execute_process(
  COMMAND "${FUZZER}" "${SCRATCH}"
          -max_total_time=${SECONDS}
          -rss_limit_mb=2048
          -timeout=${INPUT_TIMEOUT}
          -artifact_prefix=${ARTIFACTS}/
          -print_final_stats=1
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} found a failing input (exit ${result}); "
                      "it is in ${ARTIFACTS}/. Reproduce: ${FUZZER} <that file>")
endif()
