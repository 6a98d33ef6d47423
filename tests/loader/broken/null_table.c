/* The table function exists but has nothing to give. */
#include <stddef.h>

#include <superkernel/kernel_abi.h>

SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return NULL; }
