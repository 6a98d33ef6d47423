/* A kernel whose name is the empty string. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("empty_name.ok.f32"),
    BROKEN_VALID_KERNEL(""),
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_empty_name", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
