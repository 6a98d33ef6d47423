# `superkernel run` under mpirun: the parallel LongCat-Flash (tp 2, ep 2) prints the tokens the
# one-process model prints, from random weights and from a checkpoint each rank reads only its
# shard of; and a bad argument on one rank ends both ranks with errors naming it.
#   cmake -DCLI=<superkernel> -DWRITER=<sk_cli_write_checkpoint> -DCONFIG=<longcat-parallel.yaml>
#         -DDIR=<out dir> -DMPIRUN="mpirun^^--allow-run-as-root^^--oversubscribe" -P parallel_cli.cmake
string(REPLACE "^^" ";" mpirun "${MPIRUN}")
file(REMOVE_RECURSE "${DIR}")
execute_process(COMMAND ${WRITER} ${CONFIG} ${DIR} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the checkpoint failed (${rc}): ${err}")
endif()
file(READ ${DIR}/run.yaml one_process)
file(WRITE ${DIR}/run_parallel.yaml "${one_process}parallel: {tp: 2, ep: 2}\n")

function(tokens_of name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  message("-- ${name}: exit code ${rc}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed")
  endif()
  string(REGEX MATCHALL "sequence [0-9]+ (prompt|tokens):[ 0-9]*" tokens "${out}")
  set(${name} "${tokens}" PARENT_SCOPE)
endfunction()
tokens_of(one_process ${CLI} run ${DIR}/run.yaml -q)
tokens_of(parallel_checkpoint ${mpirun} -np 2 ${CLI} run ${DIR}/run_parallel.yaml -q)
tokens_of(parallel_random ${mpirun} -np 2 ${CLI} run ${CONFIG} -q --tokens 8)
if(NOT one_process OR NOT one_process STREQUAL parallel_checkpoint OR NOT one_process STREQUAL parallel_random)
  message(FATAL_ERROR "tokens differ:\n  one process:         ${one_process}\n"
                      "  parallel, checkpoint: ${parallel_checkpoint}\n  parallel, random:     ${parallel_random}")
endif()

# Rank 1 alone gets a token id past the vocabulary (mpirun's colon syntax gives each rank its own
# arguments): it fails before the prefill, rank 0 stops in its first collective, naming rank 1.
execute_process(COMMAND ${mpirun} -np 1 ${CLI} run ${CONFIG} -q --prompt 1,2,3 : -np 1 ${CLI} run ${CONFIG} -q
                        --prompt 1,2,99999
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message("-- bad prompt on rank 1: exit code ${rc}\n${out}${err}")
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected a non-zero exit code, got '${rc}'")
endif()
foreach(pattern "error: rank 1: --prompt: token id 99999" "error: rank 0: kernel .comm[.][a-z_.0-9]+. .*rank 1 failed: .*99999")
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "the output does not match: ${pattern}")
  endif()
endforeach()
