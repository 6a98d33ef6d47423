/* Attribute blob of the communication kernels (package libsk_kernels_comm.so, docs/COMM.md).
 * Plain C with fixed-size fields, like every attrs_*.h: the kernels check
 * `attrs_size == sizeof(sk_comm_attrs)` and memcpy the blob. The graph builders of
 * include/superkernel/comm.h fill it; kernels never see an MPI type, only `comm`, a handle that
 * the communication layer of the same process resolves to its MPI communicator.
 *
 *   sk_comm_attrs a = {0};
 *   a.comm = group.handle; a.rank = group.rank; a.size = group.size;
 *   a.tag = 7;                                   // unique per communication op of the graph
 */
#ifndef SUPERKERNEL_ATTRS_COMM_H_
#define SUPERKERNEL_ATTRS_COMM_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sk_comm_attrs::in_layout / out_layout of comm.all_to_all_v: how the rows of (rank q, group g)
 * blocks follow each other. */
enum {
  SK_COMM_RANK_MAJOR = 0, /* all of rank 0's groups, then rank 1's, ... */
  SK_COMM_GROUP_MAJOR = 1 /* group 0 of every rank, then group 1 of every rank, ... */
};

typedef struct sk_comm_attrs {
  uint64_t comm;      /* communicator handle (sk::comm::Group::handle) */
  uint32_t tag;       /* distinguishes the op's messages from every other op's on the same communicator */
  int32_t rank;       /* this process's rank, as the graph was built for it */
  int32_t size;       /* ranks of the communicator */
  int32_t groups;     /* comm.all_to_all_v: blocks per rank (e.g. local experts); else 1 */
  int32_t in_layout;  /* comm.all_to_all_v: SK_COMM_RANK_MAJOR or SK_COMM_GROUP_MAJOR */
  int32_t out_layout; /* comm.all_to_all_v: SK_COMM_RANK_MAJOR or SK_COMM_GROUP_MAJOR */
  int32_t root;       /* comm.broadcast: the rank whose data everyone receives; else 0 */
  int32_t reserved;   /* 0 */
} sk_comm_attrs;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SUPERKERNEL_ATTRS_COMM_H_ */
