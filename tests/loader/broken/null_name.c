/* A kernel whose name is NULL: only its index can identify it. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("null_name.ok.f32"),
    BROKEN_VALID_KERNEL(NULL),
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_null_name", BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
