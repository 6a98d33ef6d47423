# Runs the scaling model's measurement chain once, briefly, and checks its shape, never its
# figures: sk_bench_comm writes JSON with every collective's contenders and the step per mode, a
# trace of the parallel model is written, and comm_scaling.py turns both into the four layouts.
#   cmake -DMPIRUN=<mpirun and flags, ^^-separated> -DBENCH=<sk_bench_comm> -DCLI=<superkernel>
#         -DPYTHON=<python3> -DSCRIPT=<comm_scaling.py> -DCONFIG=<longcat-parallel.yaml> -DDIR=<out dir>
#         -P comm_scaling_smoke.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "^^" ";" mpirun "${MPIRUN}")
file(MAKE_DIRECTORY "${DIR}")
set(json "${DIR}/comm_smoke.json")
set(trace "${DIR}/comm_smoke_trace.json")
file(REMOVE "${json}" "${trace}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${what}: exit code ${rc}\n-- stdout --\n${out}\n-- stderr --\n${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed with exit code ${rc}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(sk_bench_comm ${mpirun} -np 2 "${BENCH}" --runs 2 --json "${json}")
file(READ "${json}" text)
string(JSON count LENGTH "${text}" results)
# 7 collectives x 4 contenders, the all-reduces' MPI_Allreduce (3), the step per mode on 2x1 and 1x2 (6).
if(NOT count EQUAL 37)
  message(FATAL_ERROR "${count} results in ${json}, expected 37")
endif()

run("superkernel trace" ${mpirun} -np 2 "${CLI}" trace "${CONFIG}" --mode superkernel -q -o "${trace}")
run(comm_scaling.py "${PYTHON}" "${SCRIPT}" --comm "${json}" "${json}" --trace "${trace}")
foreach(row "run 1: K = [0-9.]+ us per layer" "\\| 2 \\| W = 2, tp = ep = 2 \\| [0-9.]+ \\|"
            "\\| 2 \\| tp = 8 in a machine, ep = 128 \\(published\\) \\| [0-9.]+ \\|.*\\| [0-9.]+ \\|\n")
  if(NOT out MATCHES "${row}")
    message(FATAL_ERROR "comm_scaling.py printed no line matching '${row}'")
  endif()
endforeach()

# A trace count that pairs with neither one nor every --comm file is a usage error.
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" --comm "${json}" "${json}" "${json}" --trace "${trace}" "${trace}"
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "give one --trace, or one per --comm file \\(3\\), not 2")
  message(FATAL_ERROR "mismatched --trace count: exit ${rc}, stderr: ${err}")
endif()
