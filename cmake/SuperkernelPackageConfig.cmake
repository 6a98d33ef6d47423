# Makes this build tree usable as a CMake package, so that kernel packages can be built out of
# tree without installing superkernel first:
#
#   cmake -S my_kernels -B my_kernels/build -Dsuperkernel_DIR=<superkernel build dir>
#
# and in my_kernels/CMakeLists.txt:
#
#   find_package(superkernel 0.1 REQUIRED CONFIG)
#   superkernel_add_kernel_package(NAME my_kernels SOURCES my_kernels.c)
#
# The generated config offers what a kernel package needs, the header-only target
# superkernel::kernel_abi and superkernel_add_kernel_package(), and, for host programs that build
# and run graphs, the imported runtime library superkernel::superkernel (exported by
# src/CMakeLists.txt). Packages themselves never link the runtime.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

configure_file(${CMAKE_CURRENT_LIST_DIR}/superkernelConfig.cmake.in ${CMAKE_BINARY_DIR}/superkernelConfig.cmake
               @ONLY)
# Packages built against any 0.x runtime load into any other as long as SK_KERNEL_ABI_VERSION
# matches, and the loader checks that at dlopen time; the CMake version only gates the helper
# function's interface, which stays backwards compatible within a major version. Not
# ARCH_INDEPENDENT: a package must match the runtime's pointer size to be dlopen'ed by it.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/superkernelConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMajorVersion)
