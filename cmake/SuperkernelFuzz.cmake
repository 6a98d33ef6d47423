# Fuzz targets: one executable per parser or loader, each defining LLVMFuzzerTestOneInput.
#
#   sk_fuzz_target(scope_options scope_options_fuzz.cc)
#
# With SK_FUZZ=ON (clang only; the `asan` preset, also the `fuzz` one) the target links libFuzzer,
# it and what it drives are coverage-instrumented (sk_fuzz_coverage), and ctest runs it for
# SK_FUZZ_SECONDS seconds from its seed corpus (test fuzz.<name>.run). In every build the same
# executable is also built with a small replay driver instead of libFuzzer, and ctest replays the
# seed corpus and the regression inputs through it (test fuzz.<name>.replay), so each input that
# once crashed stays a test everywhere.
option(SK_FUZZ "Build the fuzz targets with libFuzzer (clang) and run them from ctest" OFF)
set(SK_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target runs in ctest (test fuzz.<name>.run)")

if(SK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SK_FUZZ needs clang (libFuzzer): configure with the 'fuzz' preset")
  endif()
endif()

# sk_fuzz_coverage(<target>...): coverage feedback for libFuzzer from these targets' code too,
# not only from the fuzz targets'. Given to what the fuzzers parse and compile (the library, the
# config and checkpoint readers), not to the kernels or the test programs: instrumenting every
# edge of the kernels' inner loops made the whole ASan test phase about 1.5x slower, for
# feedback on kernel branches that depend on shapes the fuzzers do not choose.
function(sk_fuzz_coverage)
  if(SK_FUZZ)
    foreach(target ${ARGN})
      target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    endforeach()
  endif()
endfunction()

# sk_fuzz_target(<name> <source>...): the executable sk_fuzz_<name>, its seed corpus
# tests/fuzz/corpus/<name>/ and its regression inputs tests/fuzz/regressions/<name>/.
function(sk_fuzz_target name)
  set(target sk_fuzz_${name})
  set(corpus ${SK_FUZZ_SOURCE_DIR}/corpus/${name})
  set(regressions ${SK_FUZZ_SOURCE_DIR}/regressions/${name})
  if(NOT IS_DIRECTORY ${corpus})
    message(FATAL_ERROR "sk_fuzz_target(${name}): seed corpus ${corpus} is missing")
  endif()
  add_executable(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE superkernel::superkernel sk_warnings ${CMAKE_DL_LIBS})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  add_dependencies(${target} sk_kernels_builtin)
  sk_fuzz_coverage(${target})
  if(SK_FUZZ)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  else()
    target_sources(${target} PRIVATE ${SK_FUZZ_SOURCE_DIR}/replay_main.cc)
  endif()
  add_dependencies(sk_fuzz_all ${target})

  # Given files (not directories), libFuzzer and the replay driver both run each once and stop.
  # CONFIGURE_DEPENDS: a new seed or regression input is picked up by the next build.
  file(GLOB replay_inputs CONFIGURE_DEPENDS ${corpus}/* ${regressions}/*)
  list(SORT replay_inputs)
  add_test(NAME fuzz.${name}.replay COMMAND ${target} ${replay_inputs})
  set_tests_properties(fuzz.${name}.replay PROPERTIES LABELS "fuzz;fuzz-replay" TIMEOUT 300)
  if(SK_FUZZ)
    # New inputs go to a corpus in the build tree (first directory), never into the sources.
    set(work ${CMAKE_CURRENT_BINARY_DIR}/work/${name})
    file(MAKE_DIRECTORY ${work}/corpus ${work}/artifacts)
    set(seed_dirs ${corpus})
    if(IS_DIRECTORY ${regressions})
      list(APPEND seed_dirs ${regressions})
    endif()
    # -rss_limit_mb also caps a single allocation: a parser must bound what it allocates.
    add_test(NAME fuzz.${name}.run
             COMMAND ${target} -max_total_time=${SK_FUZZ_SECONDS} -timeout=60 -rss_limit_mb=2048
                     -print_final_stats=1 -artifact_prefix=${work}/artifacts/ ${work}/corpus ${seed_dirs})
    set_tests_properties(fuzz.${name}.run PROPERTIES LABELS "fuzz;fuzz-run" TIMEOUT 600)
  endif()
endfunction()
