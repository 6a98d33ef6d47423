/* A kernel without its required run entry. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("null_run.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "null_run.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, NULL, NULL, NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_null_run", BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
