// What a communicator is inside the process: its MPI communicators, the failure notices other
// ranks send, and the registry that turns the handle a kernel finds in its attributes into this
// state. Shared by libsuperkernel_comm (which creates it) and the kernel package (which resolves
// handles), both of this project; nothing outside src/comm sees an MPI type.
#ifndef SUPERKERNEL_COMM_COMM_STATE_H_
#define SUPERKERNEL_COMM_COMM_STATE_H_

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "superkernel/comm.h"

namespace sk::comm {

// A failure notice on the wire: the failed rank and its message (NUL-terminated).
struct Notice {
  int32_t rank = -1;
  char message[1020] = {};
};

struct Communicator::State {
  MPI_Comm data = MPI_COMM_NULL;     // the collectives' messages
  MPI_Comm control = MPI_COMM_NULL;  // failure notices, apart so they never match a collective's receive
  int32_t rank = 0;
  int32_t size = 1;
  uint64_t handle = 0;
  int32_t tag_slots = 1;  // distinct op tags the MPI tag range holds (kTagPhases tags per op)
  int64_t watchdog_ns = 0;
  std::atomic<bool> open{true};

  // The one posted receive for another rank's notice. Tested under `notice_mu` (an MPI request
  // may not be completed by two threads at once); a core that finds the mutex taken skips the
  // test, because whoever holds it is testing already.
  std::mutex notice_mu;
  MPI_Request notice_request = MPI_REQUEST_NULL;
  Notice notice_in;
  // -1 until a notice arrived; release-stored after `failure` is written, so a reader that sees
  // a rank (acquire) may read the message.
  std::atomic<int32_t> failed_rank{-1};
  PeerFailure failure;
  bool notified = false;  // fail() told the others already

  // The rank whose notice arrived (testing for one now), or -1.
  int32_t poll_notices();
};

// Message tags per collective op: each phase of an op (counts, payload, reduce, gather) has its own.
inline constexpr int32_t kTagPhases = 4;
inline constexpr int32_t kNoticeTag = 1;

// The state behind `handle`, or nullptr when no open communicator of this process has it.
Communicator::State* resolve(uint64_t handle);

}  // namespace sk::comm

#endif  // SUPERKERNEL_COMM_COMM_STATE_H_
