// One collective call as its kernel runs it: the communicator its attributes name, the
// non-blocking messages it has in flight, and the wait for them, which polls instead of blocking
// so that the launch's abort flag, the watchdog and other ranks' failure notices all reach it.
#ifndef SUPERKERNEL_COMM_EXCHANGE_H_
#define SUPERKERNEL_COMM_EXCHANGE_H_

#include <mpi.h>

#include <cstdint>

#include "comm/comm_state.h"
#include "superkernel/attrs_comm.h"
#include "superkernel/kernel_abi.h"

namespace sk::comm {

// Requests of one phase, each with the rank at the other end (for the watchdog's message).
struct Requests {
  MPI_Request* req = nullptr;
  int32_t* peer = nullptr;  // >= 0: a receive from that rank; -1 - q: a send to rank q
  int32_t count = 0;
  int32_t capacity = 0;
};

// Bytes of workspace the request arrays of up to `requests` requests take (a multiple of 64).
uint64_t request_bytes(int64_t requests);

class Exchange {
 public:
  // `workspace` starts with request_bytes(max_requests) bytes for the request arrays.
  Exchange(const char* kernel, const sk_kernel_args* args, const sk_core_ctx* core, void* workspace,
           int32_t max_requests);

  // Checks the attributes and resolves the communicator; SK_OK or an error code (message set).
  int32_t begin();
  const sk_comm_attrs& attrs() const { return attrs_; }
  int32_t rank() const { return attrs_.rank; }
  int32_t size() const { return attrs_.size; }

  // Posts a receive of `bytes` bytes from rank `from` / a send to rank `to`, in phase `phase` of
  // this op's messages; zero bytes post nothing. SK_OK or an error code.
  int32_t recv(void* data, int64_t bytes, int32_t from, int32_t phase);
  int32_t send(const void* data, int64_t bytes, int32_t to, int32_t phase);
  // Waits for every posted request: SK_OK, or an error code with the message set (another rank's
  // failure, the launch aborting, the watchdog, an MPI error). On error the requests still in
  // flight are cancelled (receives) or left to finish on their own (sends).
  int32_t wait_all();

  // Formats the kernel's error message ("<kernel>: ...") and returns `code`.
  int32_t fail(int32_t code, const char* format, ...) __attribute__((format(printf, 3, 4)));

 private:
  int32_t tag(int32_t phase) const;
  int32_t poll(int64_t idle_ns);
  void abandon();
  int32_t mpi_failed(int rc, const char* what, int32_t peer);

  const char* kernel_;
  const sk_kernel_args* args_;
  const sk_core_ctx* core_;
  sk_comm_attrs attrs_{};
  Communicator::State* comm_ = nullptr;
  Requests reqs_;
};

}  // namespace sk::comm

#endif  // SUPERKERNEL_COMM_EXCHANGE_H_
