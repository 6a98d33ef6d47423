# Makes this build tree, and the install tree `cmake --install` writes, usable as a CMake package,
# so that kernel packages and host programs can be built out of tree. Against the build tree:
#
#   cmake -S my_kernels -B my_kernels/build -Dsuperkernel_DIR=<superkernel build dir>
#
# and in my_kernels/CMakeLists.txt:
#
#   find_package(superkernel 0.1 REQUIRED CONFIG)
#   superkernel_add_kernel_package(NAME my_kernels SOURCES my_kernels.c)
#
# Against an install prefix, -Dsuperkernel_DIR=<prefix>/lib/cmake/superkernel or
# -DCMAKE_PREFIX_PATH=<prefix>; both trees offer the same targets and function.
#
# The generated config offers what a kernel package needs, the header-only target
# superkernel::kernel_abi and superkernel_add_kernel_package(), and, for host programs that build
# and run graphs, the imported runtime library superkernel::superkernel (exported by
# src/CMakeLists.txt). Packages themselves never link the runtime.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

# Build tree: absolute paths into the source and build directories.
set(SK_CONFIG_PREFIX_CODE "")
set(SK_CONFIG_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/include")
set(SK_CONFIG_LIBRARY_DIR "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}")
set(SK_CONFIG_MODULE_DIR "${PROJECT_SOURCE_DIR}/cmake")
configure_file(${CMAKE_CURRENT_LIST_DIR}/superkernelConfig.cmake.in ${CMAKE_BINARY_DIR}/superkernelConfig.cmake
               @ONLY)

# Install tree: paths relative to the config file's own location, so the prefix can move.
set(SK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/superkernel)
file(RELATIVE_PATH _sk_up "${CMAKE_INSTALL_PREFIX}/${SK_INSTALL_CMAKEDIR}" "${CMAKE_INSTALL_PREFIX}")
set(SK_CONFIG_PREFIX_CODE "get_filename_component(_sk_prefix \"\${CMAKE_CURRENT_LIST_DIR}/${_sk_up}\" ABSOLUTE)")
set(SK_CONFIG_INCLUDE_DIR "\${_sk_prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
set(SK_CONFIG_LIBRARY_DIR "\${_sk_prefix}/${CMAKE_INSTALL_LIBDIR}")
set(SK_CONFIG_MODULE_DIR "\${CMAKE_CURRENT_LIST_DIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/superkernelConfig.cmake.in
               ${CMAKE_BINARY_DIR}/install-config/superkernelConfig.cmake @ONLY)
unset(_sk_up)
# Packages built against any 0.x runtime load into any other as long as SK_KERNEL_ABI_VERSION
# matches, and the loader checks that at dlopen time; the CMake version only gates the helper
# function's interface, which stays backwards compatible within a major version. Not
# ARCH_INDEPENDENT: a package must match the runtime's pointer size to be dlopen'ed by it.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/superkernelConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMajorVersion)

install(EXPORT superkernelTargets NAMESPACE superkernel:: DESTINATION ${SK_INSTALL_CMAKEDIR})
install(FILES ${CMAKE_BINARY_DIR}/install-config/superkernelConfig.cmake
              ${CMAKE_BINARY_DIR}/superkernelConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/SuperkernelKernelPackage.cmake
        DESTINATION ${SK_INSTALL_CMAKEDIR})
