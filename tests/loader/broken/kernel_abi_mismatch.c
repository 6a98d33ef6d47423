/* The package header is current but its second descriptor claims another ABI version. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("kernel_abi.ok.f32"),
    {SK_KERNEL_ABI_VERSION + 1u, "kernel_abi.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, broken_ok_run, NULL, NULL, NULL,
     NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_kernel_abi_mismatch", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
