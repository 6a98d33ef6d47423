/* SK_WORKSPACE_PER_CORE asks for per-core slices of a workspace whose size nobody reports. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("per_core_ws.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "per_core_ws.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_WORKSPACE_PER_CORE, broken_ok_run,
     NULL, NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_per_core_workspace_without_size",
                                           BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
