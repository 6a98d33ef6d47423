/* A test package for sk_core_ctx::poll: a kernel that waits for something that never comes, as a
 * collective waits for a rank that stopped, polling on every round like the comm kernels do. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "superkernel/kernel_abi.h"

/* test.poll_until_stopped(x f32 [1]) -> y f32 [2]:
 *   core 0 waits until poll says stop, then writes y[0] = the code poll returned and returns it;
 *   core 1 (when the op runs on two cores) fails after x[0] milliseconds with code 7. */
static int32_t poll_until_stopped_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  float* y = (float*)a->outputs[0].data;
  if (c->core_id == 1) {
    const float ms = ((const float*)a->inputs[0].data)[0];
    struct timespec pause = {0, (long)(ms * 1e6f)};
    nanosleep(&pause, NULL);
    snprintf(c->error_message, c->error_capacity, "core 1 fails on purpose");
    return 7;
  }
  if (c->core_id != 0) return SK_OK;
  if (c->poll == NULL) {
    snprintf(c->error_message, c->error_capacity, "no poll in the core context");
    return SK_ERR_INVALID_ARGUMENT;
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t idle = (int64_t)(now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec);
    const int32_t rc = c->poll(c, idle);
    if (rc == SK_OK) continue;
    y[0] = (float)rc;
    if (rc == SK_ERR_TIMEOUT) snprintf(c->error_message, c->error_capacity, "waited for a message that never comes");
    return rc;
  }
}

static int32_t poll_until_stopped_access(const sk_kernel_args* a, int32_t core_id, int32_t num_cores,
                                         sk_access_range* ranges, int32_t capacity) {
  (void)num_cores;
  if (core_id > 1) return 0;
  if (capacity >= 2) {
    ranges[0].operand = 0;
    ranges[0].mode = SK_ACCESS_READ;
    ranges[0].begin = 0;
    ranges[0].end = 4;
    ranges[1].operand = 1;
    ranges[1].mode = SK_ACCESS_WRITE;
    ranges[1].begin = core_id * 4;
    ranges[1].end = core_id * 4 + 4;
  }
  (void)a;
  return 2;
}

static const sk_kernel_desc kKernels[] = {
    {SK_KERNEL_ABI_VERSION, "test.poll_until_stopped", SK_KERNEL_VECTOR, SK_FUSIBLE, poll_until_stopped_run, NULL, NULL,
     NULL, poll_until_stopped_access, 0},
};
static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "test_poll", 1, kKernels};

SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &kPackage; }
