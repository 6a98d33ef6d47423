# SK_SANITIZE applies to every target of the build (a sanitized runtime must load sanitized
# kernel packages), so the flags are global rather than per target.
if(SK_SANITIZE)
  string(REPLACE ";" "," _sk_sanitizers "${SK_SANITIZE}")
  # Line tables are all a sanitizer report needs, and far cheaper to build than full debug
  # information (the last -g option wins, so this overrides the build type's -g).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-fsanitize=${_sk_sanitizers} -fno-omit-frame-pointer -gline-tables-only)
  else()
    add_compile_options(-fsanitize=${_sk_sanitizers} -fno-omit-frame-pointer -g1)
  endif()
  add_link_options(-fsanitize=${_sk_sanitizers})
  if("undefined" IN_LIST SK_SANITIZE)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  # GCC 12 reports maybe-uninitialized false positives inside std::regex and std::function once
  # sanitizer instrumentation changes inlining; the release build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()

# libFuzzer instrumentation is another global flag set, so it lives beside the sanitizers.
set(SK_FUZZ_SOURCE_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
include(SuperkernelFuzz)
