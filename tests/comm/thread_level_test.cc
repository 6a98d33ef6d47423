// Communicator::world() on an MPI that the program initialised with less than
// MPI_THREAD_MULTIPLE: a clear error naming both levels, not a collective that misbehaves later.
// Exits 0 when the error is the expected one (run under mpirun -np 1).
#include <mpi.h>

#include <cstdio>
#include <string>

#include "superkernel/comm.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided >= MPI_THREAD_MULTIPLE) {
    std::printf("this MPI gave MPI_THREAD_MULTIPLE when asked for less; nothing to test\n");
    MPI_Finalize();
    return 0;
  }
  auto world = sk::comm::Communicator::world();
  int rc = 0;
  if (world) {
    std::printf("FAIL: world() accepted an MPI initialised below MPI_THREAD_MULTIPLE\n");
    rc = 1;
  } else {
    const std::string m = world.status().to_string();
    std::printf("%s\n", m.c_str());
    if (world.status().code() != sk::StatusCode::kFailedPrecondition ||
        m.find("MPI_THREAD_SERIALIZED") == std::string::npos || m.find("MPI_THREAD_MULTIPLE") == std::string::npos) {
      std::printf("FAIL: the error does not name both thread levels\n");
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
