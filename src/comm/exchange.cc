#include "comm/exchange.h"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace sk::comm {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t round_up_64(uint64_t n) { return (n + 63) / 64 * 64; }

// The runtime's back-off (sk_core_ctx::poll) for calls made outside a launch: spin briefly, then
// yield, then sleep in short steps.
void back_off(int64_t idle_ns) {
  if (idle_ns < 200'000) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (idle_ns < 1'200'000) {
    sched_yield();
  } else {
    const timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

uint64_t request_bytes(int64_t requests) {
  return round_up_64(static_cast<uint64_t>(requests) * sizeof(MPI_Request)) +
         round_up_64(static_cast<uint64_t>(requests) * sizeof(int32_t));
}

Exchange::Exchange(const char* kernel, const sk_kernel_args* args, const sk_core_ctx* core, void* workspace,
                   int32_t max_requests)
    : kernel_(kernel), args_(args), core_(core) {
  auto* base = static_cast<uint8_t*>(workspace);
  reqs_.req = reinterpret_cast<MPI_Request*>(base);
  reqs_.peer =
      reinterpret_cast<int32_t*>(base + round_up_64(static_cast<uint64_t>(max_requests) * sizeof(MPI_Request)));
  reqs_.capacity = workspace ? max_requests : 0;
}

int32_t Exchange::fail(int32_t code, const char* format, ...) {
  if (core_->error_message && core_->error_capacity > 0) {
    int used = std::snprintf(core_->error_message, core_->error_capacity, "%s: ", kernel_);
    if (used < 0) used = 0;
    if (static_cast<uint32_t>(used) < core_->error_capacity) {
      va_list ap;
      va_start(ap, format);
      std::vsnprintf(core_->error_message + used, core_->error_capacity - static_cast<uint32_t>(used), format, ap);
      va_end(ap);
    }
  }
  return code;
}

int32_t Exchange::begin() {
  if (args_->attrs_size != sizeof(sk_comm_attrs) || args_->attrs == nullptr)
    return fail(SK_ERR_INVALID_ARGUMENT, "attributes must be an sk_comm_attrs (%zu bytes), got %u bytes",
                sizeof(sk_comm_attrs), args_->attrs_size);
  std::memcpy(&attrs_, args_->attrs, sizeof(attrs_));
  if (attrs_.size < 1 || attrs_.rank < 0 || attrs_.rank >= attrs_.size)
    return fail(SK_ERR_INVALID_ARGUMENT, "rank %d of %d ranks is not a rank", attrs_.rank, attrs_.size);
  comm_ = resolve(attrs_.comm);
  if (comm_ == nullptr)
    return fail(SK_ERR_INVALID_ARGUMENT,
                "communicator handle %llu is not an open communicator of this process (was the graph built from "
                "another process's sk::comm::Group, or the communicator destroyed?)",
                static_cast<unsigned long long>(attrs_.comm));
  if (comm_->rank != attrs_.rank || comm_->size != attrs_.size)
    return fail(SK_ERR_INVALID_ARGUMENT, "the graph was built for rank %d of %d, but this process is rank %d of %d",
                attrs_.rank, attrs_.size, comm_->rank, comm_->size);
  if (reqs_.capacity < 2 * (attrs_.size - 1) && attrs_.size > 1)
    return fail(SK_ERR_INVALID_ARGUMENT, "workspace too small for %d ranks (was the op built for another size?)",
                attrs_.size);
  return SK_OK;
}

int32_t Exchange::tag(int32_t phase) const {
  return static_cast<int32_t>(attrs_.tag % static_cast<uint32_t>(comm_->tag_slots)) * kTagPhases + phase;
}

int32_t Exchange::mpi_failed(int rc, const char* what, int32_t peer) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  abandon();
  return fail(SK_ERR_INTERNAL, "%s rank %d failed: %s", what, peer, text);
}

int32_t Exchange::recv(void* data, int64_t bytes, int32_t from, int32_t phase) {
  if (bytes == 0) return SK_OK;
  if (bytes > INT32_MAX)
    return fail(SK_ERR_INVALID_ARGUMENT, "a message of %lld bytes exceeds 2 GiB", (long long)bytes);
  if (reqs_.count == reqs_.capacity) return fail(SK_ERR_INTERNAL, "more requests than planned");
  const int32_t i = reqs_.count;
  if (int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, from, tag(phase), comm_->data, &reqs_.req[i]);
      rc != MPI_SUCCESS)
    return mpi_failed(rc, "a receive from", from);
  reqs_.peer[i] = from;
  ++reqs_.count;
  return SK_OK;
}

int32_t Exchange::send(const void* data, int64_t bytes, int32_t to, int32_t phase) {
  if (bytes == 0) return SK_OK;
  if (bytes > INT32_MAX)
    return fail(SK_ERR_INVALID_ARGUMENT, "a message of %lld bytes exceeds 2 GiB", (long long)bytes);
  if (reqs_.count == reqs_.capacity) return fail(SK_ERR_INTERNAL, "more requests than planned");
  const int32_t i = reqs_.count;
  if (int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag(phase), comm_->data, &reqs_.req[i]);
      rc != MPI_SUCCESS)
    return mpi_failed(rc, "a send to", to);
  reqs_.peer[i] = -1 - to;
  ++reqs_.count;
  return SK_OK;
}

int32_t Exchange::poll(int64_t idle_ns) {
  if (core_->poll) return core_->poll(core_, idle_ns);
  if (idle_ns > comm_->watchdog_ns) return SK_ERR_TIMEOUT;
  back_off(idle_ns);
  return SK_OK;
}

void Exchange::abandon() {
  for (int32_t i = 0; i < reqs_.count; ++i) {
    if (reqs_.req[i] == MPI_REQUEST_NULL) continue;
    // A receive that may never be matched is cancelled; a send cannot be taken back and finishes
    // (or not) on its own. Either way the request is freed, so nothing refers to it afterwards.
    if (reqs_.peer[i] >= 0) MPI_Cancel(&reqs_.req[i]);
    MPI_Request_free(&reqs_.req[i]);
  }
  reqs_.count = 0;
}

int32_t Exchange::wait_all() {
  int64_t last_progress = now_ns();
  for (;;) {
    int32_t active = 0;
    bool progressed = false;
    for (int32_t i = 0; i < reqs_.count; ++i) {
      if (reqs_.req[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Status status;
      if (int rc = MPI_Test(&reqs_.req[i], &done, &status); rc != MPI_SUCCESS)
        return mpi_failed(rc, reqs_.peer[i] >= 0 ? "a receive from" : "a send to",
                          reqs_.peer[i] >= 0 ? reqs_.peer[i] : -1 - reqs_.peer[i]);
      if (done) {
        progressed = true;
      } else {
        ++active;
      }
    }
    if (active == 0) {
      reqs_.count = 0;
      return SK_OK;
    }
    const int64_t now = now_ns();
    if (progressed) last_progress = now;
    if (const int32_t failed = comm_->poll_notices(); failed >= 0) {
      abandon();
      return fail(SK_ERR_INTERNAL, "rank %d failed: %s", failed, comm_->failure.message.c_str());
    }
    const int32_t rc = poll(now - last_progress);
    if (rc == SK_OK) continue;
    if (rc == SK_ERR_TIMEOUT) {
      // Name the ranks this rank still waits for: the first one is usually the one that stopped.
      char who[256] = {};
      size_t used = 0;
      int32_t listed = 0;
      for (int32_t i = 0; i < reqs_.count && used + 40 < sizeof(who); ++i) {
        if (reqs_.req[i] == MPI_REQUEST_NULL) continue;
        const bool is_recv = reqs_.peer[i] >= 0;
        const int32_t peer = is_recv ? reqs_.peer[i] : -1 - reqs_.peer[i];
        used +=
            static_cast<size_t>(std::snprintf(who + used, sizeof(who) - used, "%srank %d (%s)", listed++ ? ", " : "",
                                              peer, is_recv ? "no message yet" : "has not received"));
      }
      abandon();
      return fail(SK_ERR_TIMEOUT, "rank %d waits for %s; that rank stopped, hangs or never reached this op", rank(),
                  who);
    }
    abandon();
    return rc == SK_ERR_ABORTED ? SK_ERR_ABORTED : fail(rc, "the wait was stopped (code %d)", rc);
  }
}

}  // namespace sk::comm
