/* A valid package. It becomes a conflict only when cross_second.c is loaded after it. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("cross.first_only.f32"),
    BROKEN_VALID_KERNEL("cross.shared.f32"),
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_cross_first", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
