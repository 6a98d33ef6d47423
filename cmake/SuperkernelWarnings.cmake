# Warnings for the project's own targets only (never for third-party code).
add_library(sk_warnings INTERFACE)
target_compile_options(sk_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough>
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wimplicit-fallthrough>)
# GCC 12 reports -Wrestrict inside std::string's char_traits for ordinary string concatenation
# at -O3 (GCC bug 105651); the warning stays on for every other compiler.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(sk_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  # Under -fsanitize=thread, GCC 12 also reports -Wnull-dereference inside libstdc++'s
  # std::string move when vector<string>::emplace_back is inlined (CLI11's split); the code
  # has no null path, and the warning stays on in every other build.
  if("thread" IN_LIST SK_SANITIZE)
    target_compile_options(sk_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-null-dereference>)
  endif()
endif()
if(SK_WERROR)
  target_compile_options(sk_warnings INTERFACE -Werror)
endif()
