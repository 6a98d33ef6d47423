/* Flag bits this runtime does not know (bit 5, from some future ABI). */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {
    BROKEN_VALID_KERNEL("unknown_flags.ok.f32"),
    {SK_KERNEL_ABI_VERSION, "unknown_flags.bad.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | (1u << 6), broken_ok_run, NULL,
     NULL, NULL, NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_unknown_flags", BROKEN_COUNT(kKernels),
                                           kKernels};
BROKEN_EXPORT_TABLE(kPackage)
