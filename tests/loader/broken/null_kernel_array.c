/* Announces kernels but points at none. */
#include <stddef.h>

#include <superkernel/kernel_abi.h>

static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_null_kernel_array", 3, NULL};

SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &kPackage; }
