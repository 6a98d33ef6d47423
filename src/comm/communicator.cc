// Communicators: MPI start-up with the thread level checked, the handle registry the kernels
// resolve, failure notices between ranks, and finalisation bounded by the watchdog.
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_state.h"
#include "superkernel/runtime.h"

namespace sk::comm {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown MPI thread level";
}

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "the MPI library";
  std::string v(text, static_cast<size_t>(len));
  if (size_t nl = v.find_first_of("\r\n,"); nl != std::string::npos) v.resize(nl);
  return v;
}

// Handles pack a slot and a serial number, so a handle of a closed communicator never resolves
// to a later one in the same slot. Slots are atomics: kernels resolve without a lock.
constexpr size_t kMaxCommunicators = 256;
std::array<std::atomic<Communicator::State*>, kMaxCommunicators> g_slots{};
std::mutex g_registry_mu;  // creation, closing and finalisation
uint64_t g_serial = 0;
bool g_we_initialised = false;
bool g_finalised = false;

uint64_t make_handle(size_t slot, uint64_t serial) { return (serial << 8) | static_cast<uint64_t>(slot); }

void close_state(Communicator::State& s) {
  if (!s.open.exchange(false)) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  {
    std::lock_guard<std::mutex> lock(s.notice_mu);
    if (s.notice_request != MPI_REQUEST_NULL) {
      MPI_Cancel(&s.notice_request);
      MPI_Request_free(&s.notice_request);
    }
  }
  MPI_Comm_free(&s.data);
  MPI_Comm_free(&s.control);
}

}  // namespace

int32_t Communicator::State::poll_notices() {
  const int32_t known = failed_rank.load(std::memory_order_acquire);
  if (known >= 0) return known;
  std::unique_lock<std::mutex> lock(notice_mu, std::try_to_lock);
  if (!lock.owns_lock() || notice_request == MPI_REQUEST_NULL) return -1;
  int done = 0;
  if (MPI_Test(&notice_request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return -1;
  notice_in.message[sizeof(notice_in.message) - 1] = '\0';
  failure.rank = notice_in.rank;
  failure.message = notice_in.message;
  // release: pairs with the acquire above and in peer_failure(), publishing `failure`.
  failed_rank.store(notice_in.rank, std::memory_order_release);
  return notice_in.rank;
}

Communicator::State* resolve(uint64_t handle) {
  const size_t slot = static_cast<size_t>(handle & 0xff);
  // acquire: pairs with the release store that published the state's fields.
  Communicator::State* s = g_slots[slot].load(std::memory_order_acquire);
  if (s == nullptr || s->handle != handle || !s->open.load(std::memory_order_relaxed)) return nullptr;
  return s;
}

Communicator::Communicator(State* state) : state_(state) {}

Communicator::~Communicator() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  close_state(*state_);
  g_slots[static_cast<size_t>(state_->handle & 0xff)].store(nullptr, std::memory_order_relaxed);
  delete state_;
}

Expected<std::shared_ptr<Communicator>> Communicator::world(const CommOptions& options) {
  if (!(options.watchdog_seconds > 0))
    return Status::invalid_argument("comm option 'watchdog_seconds' must be > 0, got " +
                                    std::to_string(options.watchdog_seconds));
  std::lock_guard<std::mutex> lock(g_registry_mu);
  if (g_finalised) return Status::failed_precondition("MPI was finalised already (sk::comm::finalize)");
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = MPI_THREAD_SINGLE;
  if (!initialised) {
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); rc != MPI_SUCCESS)
      return Status::internal("MPI_Init_thread failed: " + mpi_error(rc));
    g_we_initialised = true;
    if (provided < MPI_THREAD_MULTIPLE)
      return Status::failed_precondition(
          library_version() + " provides only " + thread_level_name(provided) +
          "; superkernel's collectives run on the runtime's worker threads, several at once with stream fusion, and "
          "need MPI_THREAD_MULTIPLE (use an MPI built with thread support, e.g. Debian's openmpi-bin)");
  } else {
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      return Status::failed_precondition(
          std::string("MPI was initialised with ") + thread_level_name(provided) +
          "; superkernel's collectives run on the runtime's worker threads, several at once with stream fusion, and "
          "need MPI_THREAD_MULTIPLE: initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let "
          "sk::comm::Communicator::world() do it");
  }

  size_t slot = kMaxCommunicators;
  for (size_t i = 0; i < kMaxCommunicators && slot == kMaxCommunicators; ++i)
    if (g_slots[i].load(std::memory_order_relaxed) == nullptr) slot = i;
  if (slot == kMaxCommunicators)
    return Status::failed_precondition("more than " + std::to_string(kMaxCommunicators) + " communicators");

  auto* s = new State();
  MPI_Comm_dup(MPI_COMM_WORLD, &s->data);
  MPI_Comm_dup(MPI_COMM_WORLD, &s->control);
  // Errors come back as return codes, which the kernels turn into messages naming the op.
  MPI_Comm_set_errhandler(s->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(s->control, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s->data, &s->rank);
  MPI_Comm_size(s->data, &s->size);
  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(s->data, MPI_TAG_UB, &tag_ub, &found);
  const int64_t max_tag = found && tag_ub ? *static_cast<int*>(tag_ub) : 32767;
  s->tag_slots = static_cast<int32_t>(std::max<int64_t>(1, (max_tag + 1) / kTagPhases));
  s->watchdog_ns = static_cast<int64_t>(options.watchdog_seconds * 1e9);
  s->handle = make_handle(slot, ++g_serial);
  MPI_Irecv(&s->notice_in, sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, s->control, &s->notice_request);
  // release: kernels resolving the handle (acquire) see every field written above.
  g_slots[slot].store(s, std::memory_order_release);
  return std::shared_ptr<Communicator>(new Communicator(s));
}

int32_t Communicator::rank() const { return state_->rank; }
int32_t Communicator::size() const { return state_->size; }
Group Communicator::group() const { return Group{state_->handle, state_->rank, state_->size}; }

std::string kernel_package_path() {
  if (const char* env = std::getenv("SK_COMM_KERNELS"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&kernel_package_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/libsk_kernels_comm.so";
  }
  return "libsk_kernels_comm.so";
}

Status Communicator::load_kernels(Runtime& runtime) const {
  for (const std::string& name : runtime.kernel_names())
    if (name.rfind("comm.", 0) == 0) return Status::ok();
  Status s = runtime.load_kernel_package(kernel_package_path());
  if (!s) return s.with_context("loading the collective kernels (set SK_COMM_KERNELS to override the path)");
  return Status::ok();
}

Status Communicator::fail(const Status& error) {
  const std::string prefix = "rank " + std::to_string(state_->rank) + ": ";
  if (error.is_ok()) return error;
  Status out(error.code(), prefix + error.message());
  if (!state_->open.load() || state_->notified || state_->poll_notices() >= 0) return out;
  state_->notified = true;
  Notice notice;
  notice.rank = state_->rank;
  std::snprintf(notice.message, sizeof(notice.message), "%s", error.to_string().c_str());
  std::vector<MPI_Request> sent;
  for (int32_t q = 0; q < state_->size; ++q) {
    if (q == state_->rank) continue;
    MPI_Request r = MPI_REQUEST_NULL;
    if (MPI_Isend(&notice, sizeof(notice), MPI_BYTE, q, kNoticeTag, state_->control, &r) == MPI_SUCCESS)
      sent.push_back(r);
  }
  // A notice is small enough to leave at once (an eager send); wait for that, but never longer
  // than the watchdog: a rank that died cannot take it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(state_->watchdog_ns);
  for (MPI_Request& r : sent) {
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!done) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!done) MPI_Request_free(&r);
  }
  return out;
}

std::optional<PeerFailure> Communicator::peer_failure() const {
  if (state_->open.load() && state_->poll_notices() < 0) return std::nullopt;
  // acquire: pairs with poll_notices()' release store of the rank after the message.
  if (state_->failed_rank.load(std::memory_order_acquire) < 0) return std::nullopt;
  return state_->failure;
}

Expected<int> Communicator::share_cpus_between_local_ranks() {
  MPI_Comm local = MPI_COMM_NULL;
  if (int rc = MPI_Comm_split_type(state_->data, MPI_COMM_TYPE_SHARED, state_->rank, MPI_INFO_NULL, &local);
      rc != MPI_SUCCESS)
    return Status::internal("MPI_Comm_split_type: " + mpi_error(rc));
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    MPI_Comm_free(&local);
    return Status::internal("sched_getaffinity failed");
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  // Did the launcher bind us already? Then the local ranks' CPU sets are disjoint: compare ours
  // with everyone's.
  std::vector<uint8_t> all(static_cast<size_t>(local_size) * sizeof(cpu_set_t));
  MPI_Allgather(&mine, sizeof(cpu_set_t), MPI_BYTE, all.data(), sizeof(cpu_set_t), MPI_BYTE, local);
  MPI_Comm_free(&local);
  bool disjoint = true;
  for (int other = 0; other < local_size && disjoint; ++other) {
    if (other == local_rank) continue;
    cpu_set_t theirs;
    std::memcpy(&theirs, all.data() + static_cast<size_t>(other) * sizeof(cpu_set_t), sizeof(cpu_set_t));
    cpu_set_t both;
    CPU_AND(&both, &mine, &theirs);
    disjoint = CPU_COUNT(&both) == 0;
  }
  if (disjoint || local_size == 1) return static_cast<int>(cpus.size());
  const size_t n = cpus.size();
  if (n < static_cast<size_t>(local_size))
    return Status::failed_precondition(std::to_string(local_size) + " ranks share this machine's " + std::to_string(n) +
                                       " CPU(s): fewer CPUs than ranks");
  const size_t begin = n * static_cast<size_t>(local_rank) / static_cast<size_t>(local_size);
  const size_t end = n * static_cast<size_t>(local_rank + 1) / static_cast<size_t>(local_size);
  cpu_set_t share;
  CPU_ZERO(&share);
  for (size_t i = begin; i < end; ++i) CPU_SET(cpus[i], &share);
  if (sched_setaffinity(0, sizeof(share), &share) != 0) return Status::internal("sched_setaffinity failed");
  return static_cast<int>(end - begin);
}

Status finalize(bool failed) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  if (g_finalised || !g_we_initialised) return Status::ok();
  int64_t watchdog_ns = 0;
  for (auto& slot : g_slots) {
    if (Communicator::State* s = slot.load(std::memory_order_relaxed)) {
      watchdog_ns = std::max(watchdog_ns, s->watchdog_ns);
      close_state(*s);
    }
  }
  g_finalised = true;
  // MPI_Finalize waits for every rank. After a failure one may never come (stuck, or killed
  // under a launcher that keeps the job going): then give up and exit rather than hang.
  std::atomic<bool> done{false};
  std::thread guard;
  if (failed) {
    const int64_t wait_ns = watchdog_ns > 0 ? watchdog_ns : 30'000'000'000;
    guard = std::thread([&done, wait_ns] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(wait_ns);
      while (!done.load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!done.load()) {
        const char msg[] = "superkernel: MPI_Finalize did not complete within the watchdog after a failure; exiting\n";
        ssize_t ignored = write(2, msg, sizeof(msg) - 1);
        (void)ignored;
        _exit(1);
      }
    });
  }
  const int rc = MPI_Finalize();
  done.store(true);
  if (guard.joinable()) guard.join();
  // Every rank is past the fence, its error written. A launcher such as mpirun ends the whole job
  // at the first non-zero exit, dropping what it has not forwarded yet: leave it a moment to
  // forward every rank's last words first.
  if (failed) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  if (rc != MPI_SUCCESS) return Status::internal("MPI_Finalize failed: " + mpi_error(rc));
  return Status::ok();
}

}  // namespace sk::comm
