// The process set-up the MPI tests share (mpi_test_main.cc): MPI's world communicator with a 20 s
// failure timeout, a one-core runtime per rank (two ranks share a 2-CPU machine) with the
// collective kernels loaded, and MPI finalised after the tests, telling the other ranks when this
// one failed. Tests reach both through these globals.
#ifndef SUPERKERNEL_TESTS_COMM_MPI_TEST_MAIN_H_
#define SUPERKERNEL_TESTS_COMM_MPI_TEST_MAIN_H_

#include <memory>

#include "superkernel/comm.h"
#include "superkernel/runtime.h"

namespace sk {

extern std::shared_ptr<comm::Communicator> g_comm;
extern std::shared_ptr<Runtime> g_runtime;

}  // namespace sk

#endif  // SUPERKERNEL_TESTS_COMM_MPI_TEST_MAIN_H_
