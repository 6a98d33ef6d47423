# superkernel_add_kernel_package(NAME <name> SOURCES <src>... [OUTPUT_DIRECTORY <dir>])
#
# Builds a kernel package: a shared object exporting `sk_kernel_package_table` (see
# include/superkernel/kernel_abi.h). Only that symbol is exported; everything else is hidden so
# that packages never clash with each other or with the runtime. Load the result with
# `sk::Runtime::load_kernel_package(path)`.
#
#   superkernel_add_kernel_package(NAME my_kernels SOURCES my_kernels.c)
#
# The package depends only on the kernel ABI header, never on the runtime library.
function(superkernel_add_kernel_package)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "superkernel_add_kernel_package: NAME and SOURCES are required")
  endif()
  add_library(${ARG_NAME} MODULE ${ARG_SOURCES})
  set_target_properties(${ARG_NAME} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${ARG_NAME} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  endif()
  if(TARGET superkernel::kernel_abi)
    target_link_libraries(${ARG_NAME} PRIVATE superkernel::kernel_abi)
  else()
    find_path(_sk_abi_dir superkernel/kernel_abi.h REQUIRED)
    target_include_directories(${ARG_NAME} PRIVATE ${_sk_abi_dir})
  endif()
endfunction()
