/* Lists the same kernel name twice. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("duplicate.ok.f32"),
    BROKEN_VALID_KERNEL("duplicate.twice.f32"),
    BROKEN_VALID_KERNEL("duplicate.twice.f32"),
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_duplicate_in_package", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
