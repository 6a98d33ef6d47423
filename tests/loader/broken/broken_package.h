/* Shared parts of the deliberately broken kernel packages that loader_test.cc loads. Where the
 * defect allows it, a package lists a valid kernel before the broken one, so that the tests can
 * tell "registered none of the package" apart from "skipped only the bad kernel". */
#ifndef SK_TESTS_LOADER_BROKEN_PACKAGE_H_
#define SK_TESTS_LOADER_BROKEN_PACKAGE_H_

#include <stddef.h>

#include <superkernel/kernel_abi.h>

static int32_t broken_ok_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  (void)args;
  (void)core;
  return SK_OK;
}

/* A descriptor the loader accepts; packages copy it and break one field. */
#define BROKEN_VALID_KERNEL(kname) \
  { SK_KERNEL_ABI_VERSION, kname, SK_KERNEL_VECTOR, SK_FUSIBLE, broken_ok_run, NULL, NULL, NULL, NULL, 0 }

#define BROKEN_COUNT(array) ((uint32_t)(sizeof(array) / sizeof((array)[0])))

/* Exports `table` the way every package must. */
#define BROKEN_EXPORT_TABLE(table) \
  SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &(table); }

#endif /* SK_TESTS_LOADER_BROKEN_PACKAGE_H_ */
