/* SK_TILING_SINK asks the runtime to run a tiling entry the kernel does not have. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("tiling_sink.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "tiling_sink.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_TILING_SINK, broken_ok_run, NULL,
     NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_tiling_sink_without_tiling",
                                           BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
