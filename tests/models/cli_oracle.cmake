# `superkernel run` on a checkpoint oracle.py wrote, as a user runs it.
#   cmake -DCLI=<superkernel> -DCASE_DIR=<oracle/CASE> -DWORK=<scratch dir> -DCHECK=<what> -P cli_oracle.cmake
# CHECK:
#   ids_<mode>     greedy decoding of the case's prompt in <mode> prints transformers' 16 greedy ids
#   verbose        -v lists config.json keys that do not change the logits, with their lines
#   refused_key    config.json with hidden_act "gelu": exit 3 naming config.json:LINE and the key
#   unread         config.json naming fewer layers than the checkpoint holds: exit 3 listing the
#                  tensors no graph reads; --allow-unused-tensors runs it and -v lists them
file(STRINGS "${CASE_DIR}/oracle.txt" lines)
foreach(line ${lines})
  if(line MATCHES "^prompt (.*)$")
    string(REPLACE " " "," prompt "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^ids_f64 (.*)$")
    set(want_ids "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^steps ([0-9]+)$")
    math(EXPR tokens "${CMAKE_MATCH_1} - 1")  # the first id comes from the prefill
  endif()
endforeach()
if(NOT prompt OR NOT want_ids)
  message(FATAL_ERROR "${CASE_DIR}/oracle.txt lacks the prompt or the ids")
endif()

# A copy of the checkpoint (its config.json may be edited) and a run config for it.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
file(COPY "${CASE_DIR}/config.json" "${CASE_DIR}/model.safetensors" DESTINATION "${WORK}/ckpt")
file(WRITE "${WORK}/run.yaml" "model:\n  checkpoint: ckpt\nruntime:\n  cores: 2\ndecode:\n  batch: 1\n")

function(run_cli expect_rc)
  execute_process(COMMAND ${CLI} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("superkernel ${ARGN}: exit code ${rc}\n-- stdout --\n${out}\n-- stderr --\n${err}")
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "expected exit code ${expect_rc}, got ${rc}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

set(run run "${WORK}/run.yaml" -q --prompt ${prompt} --tokens ${tokens})
if(CHECK MATCHES "^ids_(eager|graph|superkernel)$")
  run_cli(0 ${run} --mode ${CMAKE_MATCH_1})
  if(NOT out MATCHES "sequence 0 tokens: ([0-9 ]+)\n")
    message(FATAL_ERROR "no tokens printed")
  endif()
  string(STRIP "${CMAKE_MATCH_1}" got_ids)
  if(NOT got_ids STREQUAL want_ids)
    message(FATAL_ERROR "greedy ids differ from transformers'\n  superkernel:  ${got_ids}\n  transformers: ${want_ids}")
  endif()
elseif(CHECK STREQUAL "verbose")
  run_cli(0 ${run} -v)
  if(NOT err MATCHES "config.json:[0-9]+: key 'model_type' ignored: names the architecture")
    message(FATAL_ERROR "-v does not list model_type as ignored")
  endif()
elseif(CHECK STREQUAL "refused_key")
  file(READ "${WORK}/ckpt/config.json" json)
  string(REPLACE "{\n" "{\n  \"hidden_act\": \"gelu\",\n" json "${json}")
  file(WRITE "${WORK}/ckpt/config.json" "${json}")
  run_cli(3 ${run})
  if(NOT err MATCHES "config.json:2: key 'hidden_act': 'gelu' is not implemented")
    message(FATAL_ERROR "the error does not name config.json:2 and hidden_act")
  endif()
else()  # unread
  file(READ "${WORK}/ckpt/config.json" json)
  string(REGEX REPLACE "\"(num_hidden_layers|num_layers)\": 2" "\"\\1\": 1" json "${json}")
  file(WRITE "${WORK}/ckpt/config.json" "${json}")
  run_cli(3 ${run})
  if(NOT err MATCHES "tensors the model does not read: model\\.layers\\.1\\..*--allow-unused-tensors")
    message(FATAL_ERROR "the error does not list the second layer's tensors")
  endif()
  run_cli(0 ${run} --allow-unused-tensors -v)
  if(NOT err MATCHES "tensor 'model\\.layers\\.1\\.[a-z_.]+' not read")
    message(FATAL_ERROR "-v does not list the tensors not read")
  endif()
endif()
