# Runs the failure probe under mpirun and checks that the job ends (the ctest timeout catches a
# hang), with a non-zero exit code when a rank failed, and that the output matches every regex.
#   cmake -DMPIRUN="mpirun^^--allow-run-as-root^^..." -DPROBE=<binary> -DSCENARIO=<name>
#         -DEXPECT_RC=zero|nonzero -DEXPECT="regex^^regex..." -P run_failure.cmake
string(REPLACE "^^" ";" mpirun "${MPIRUN}")
string(REPLACE "^^" ";" expect "${EXPECT}")
execute_process(COMMAND ${mpirun} ${PROBE} ${SCENARIO} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 90)
message("exit code: ${rc}\n-- stdout --\n${out}\n-- stderr --\n${err}")
if(EXPECT_RC STREQUAL "zero" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0, got ${rc}")
endif()
if(EXPECT_RC STREQUAL "nonzero" AND (rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "expected a non-zero exit code, got '${rc}'")
endif()
foreach(pattern IN LISTS expect)
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "the output does not match: ${pattern}")
  endif()
endforeach()
