# Runs one superkernel command line and checks its exit code and output.
#   cmake -DCLI=<binary> -DARGS="arg^^arg^^..." -DEXPECT_RC=N [-DEXPECT_OUT=regex]
#         [-DEXPECT_ERR=regex] [-DEXPECT_FILE=path] [-DEMPTY_LAST_ARG=ON] -P run_cli.cmake
# EMPTY_LAST_ARG: one more argument, the empty string.
string(REPLACE "^^" ";" args "${ARGS}")
if(EMPTY_LAST_ARG)
  execute_process(COMMAND ${CLI} ${args} "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
else()
  execute_process(COMMAND ${CLI} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
message("exit code: ${rc}\n-- stdout --\n${out}\n-- stderr --\n${err}")
if(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}")
endif()
if(DEFINED EXPECT_OUT AND NOT out MATCHES "${EXPECT_OUT}")
  message(FATAL_ERROR "stdout does not match: ${EXPECT_OUT}")
endif()
if(DEFINED EXPECT_ERR AND NOT err MATCHES "${EXPECT_ERR}")
  message(FATAL_ERROR "stderr does not match: ${EXPECT_ERR}")
endif()
if(DEFINED EXPECT_FILE AND NOT EXISTS "${EXPECT_FILE}")
  message(FATAL_ERROR "expected the file ${EXPECT_FILE}")
endif()
