# Runs `superkernel bench CONFIG --json OUT`, then checks the JSON with check_bench_json.py.
execute_process(COMMAND ${CLI} bench ${CONFIG} --runs 2 -q --json ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "superkernel bench failed (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${PYTHON} ${CHECKER} ${OUT} ${CORES} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench JSON check failed: ${out}${err}")
endif()
message(STATUS "${out}")
