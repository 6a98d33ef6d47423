# cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DEXAMPLES_DIR=... -DC_COMPILER=...
#       -DCXX_COMPILER=... -DGENERATOR=... -P run_install_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n-- stdout --\n${out}\n-- stderr --\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer)
file(REMOVE_RECURSE ${WORK_DIR})

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file lib/libsuperkernel.so lib/libsk_kernels_builtin.so lib/libsuperkernel_models.so
             include/superkernel/runtime.h lib/cmake/superkernel/superkernelConfig.cmake bin/superkernel)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()

# The consumer sees only the install prefix; the built-in kernels must load from there too, so
# an override of their path must not leak in.
unset(ENV{SK_BUILTIN_KERNELS})
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${prefix} -DSK_EXAMPLES_DIR=${EXAMPLES_DIR})
run(${CMAKE_COMMAND} --build ${consumer_build})
run(${consumer_build}/sk_consumer_hello)
run(${consumer_build}/sk_consumer_custom_package)

run(${prefix}/bin/superkernel explain ${prefix}/share/superkernel/configs/llama-mini.yaml)
if(NOT run_out MATCHES "scope")
  message(FATAL_ERROR "superkernel explain printed no scopes:\n${run_out}")
endif()
