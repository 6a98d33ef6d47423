/* A package table without a name, which errors about other packages could not refer to. */
#include "broken_package.h"

static const sk_kernel_desc kKernels[] = {BROKEN_VALID_KERNEL("nameless.ok.f32")};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, NULL, BROKEN_COUNT(kKernels), kKernels};
BROKEN_EXPORT_TABLE(kPackage)
