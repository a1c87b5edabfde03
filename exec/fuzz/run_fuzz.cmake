# Bounded libFuzzer run over the seed corpus (ctest: test_exec_fuzz_gguf).
# -D REPLAY=<test_exec_fuzz_replay> -D FUZZ=<fuzz_gguf> -D DIR=<corpus dir> -D SECONDS=<n>
file(REMOVE_RECURSE ${DIR})
execute_process(COMMAND ${REPLAY} --write-corpus ${DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the seed corpus failed (${rc})")
endif()
execute_process(COMMAND ${FUZZ} ${DIR} -max_total_time=${SECONDS} -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
string(REGEX MATCH "Done [0-9]+ runs in [0-9]+ second" done "${err}")
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" units "${err}")
message(STATUS "fuzz_gguf: ${done}; ${units}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_gguf found a crash (exit ${rc}):\n${err}")
endif()
