// main() of the MPI tests: see mpi_test_main.h.
#include "mpi_test_main.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace sk {

std::shared_ptr<comm::Communicator> g_comm;
std::shared_ptr<Runtime> g_runtime;

}  // namespace sk

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = sk::comm::Communicator::world({20.0});
  if (!world) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  sk::g_comm = *world;
  sk::RuntimeOptions ro;
  ro.num_cores = 1;  // one core per rank: two ranks share a 2-CPU machine
  ro.pin_threads = false;
  ro.watchdog_seconds = 20.0;
  auto rt = sk::Runtime::create(ro);
  if (!rt) {
    std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
    return 1;
  }
  sk::g_runtime = *rt;
  if (sk::Status s = sk::g_comm->load_kernels(*sk::g_runtime); !s) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  sk::g_runtime.reset();
  sk::g_comm.reset();
  (void)sk::comm::finalize(rc != 0);
  return rc;
}
