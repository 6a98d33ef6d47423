/* Claims to call sync_all but says how many times: zero. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("sync_all_zero.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "sync_all_zero.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_USES_SYNC_ALL, broken_ok_run,
     NULL, NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_sync_all_zero", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
