/* A sync_all_count without SK_USES_SYNC_ALL: the barrier count would be silently ignored. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("sync_count.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "sync_count.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, broken_ok_run, NULL, NULL, NULL, NULL,
     2},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_sync_count_without_flag",
                                           BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
