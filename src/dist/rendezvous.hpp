// A job started without an MPI launcher: each process started by hand (or by a job system
// of its own) with KILN_RANK, KILN_WORLD_SIZE and KILN_DIST_RENDEZVOUS, a file path that
// every rank can read and rank 0 can write (a shared file system across hosts), as
// torch.distributed's file:// rendezvous. MPI still moves the data: rank 0 starts Open MPI's
// `ompi-server` (which lets separately started MPI processes connect), publishes its address
// and an MPI port beside the rendezvous path, and the other ranks connect to that port.
// Private to src/dist/.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

namespace kiln::dist::detail {

struct Rendezvous {
  int rank = 0;
  int size = 1;
  std::string path;  // KILN_DIST_RENDEZVOUS: <path>.server and <path>.port are written beside it
};

// The environment variable `name` as a whole number >= 0; nothing where it is not set (an
// error naming it where it is something else).
std::optional<long> whole_number_env(const char* name);
// The numbering KILN_RANK / KILN_WORLD_SIZE ask for when no launcher started this process
// (no mpirun, no srun) and the world has more than one rank; nothing otherwise.
std::optional<Rendezvous> launcher_free();
// Before MPI_Init: rank 0 starts ompi-server; every rank points MPI at it.
void prepare(const Rendezvous& r, double timeout);
// After MPI_Init: the ranks connect through rank 0's port. A communicator of all of them,
// ordered by KILN_RANK. A rank that does not come within `timeout` seconds ends the
// waiting ones with an error naming the rendezvous.
MPI_Comm join(const Rendezvous& r, double timeout);
// At the end: rank 0 stops its ompi-server and removes the files it wrote.
void finish(const Rendezvous& r);

}  // namespace kiln::dist::detail
