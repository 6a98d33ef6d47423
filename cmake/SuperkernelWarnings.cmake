# Warnings for the project's own targets only (never for third-party code).
add_library(sk_warnings INTERFACE)
target_compile_options(sk_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough>
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wimplicit-fallthrough>)
if(SK_WERROR)
  target_compile_options(sk_warnings INTERFACE -Werror)
endif()
