/* A kernel type outside sk_kernel_type. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("unknown_type.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "unknown_type.bad.f32", 7, SK_FUSIBLE, broken_ok_run, NULL, NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_unknown_type", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
