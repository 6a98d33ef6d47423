/* Exports its table under a misspelt name, so the loader finds no `sk_kernel_package_table`. */
#include <stddef.h>

#include <superkernel/kernel_abi.h>

static int32_t missing_symbol_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  (void)args;
  (void)core;
  return SK_OK;
}

static const sk_kernel_desc kKernels[] = {
    {SK_KERNEL_ABI_VERSION, "missing_symbol.ok.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, missing_symbol_run, NULL, NULL, NULL,
     NULL, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "loader_missing_symbol", 1, kKernels};

SK_EXPORT const sk_kernel_package* sk_kernel_package_tables(void) { return &kPackage; }
