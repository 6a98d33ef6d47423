/* Valid on its own, but provides a kernel name that cross_first.c already provides. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("cross.second_only.f32"),
    BROKEN_VALID_KERNEL("cross.shared.f32"),
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_cross_second", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
