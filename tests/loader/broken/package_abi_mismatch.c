/* A package built against a newer kernel ABI than the runtime speaks. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {BROKEN_VALID_KERNEL("package_abi.ok.f32")};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION + 1u, "loader_package_abi_mismatch",
                                           BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
