// Data-parallel collectives for `mpirun -np N tfmc train`: which rank this process is, gradient
// sums across ranks, and agreement checks. MPI is optional: a process not started by an MPI
// launcher is the single rank of a one-process world, and every collective is the identity.
// Under a launcher, tfmc loads its MPI plugin (libtfmc_mpi.so, linked against libmpi) with
// dlopen, so machines without MPI still build and run tfmc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfmrt/status.h"

namespace tfmdist {

class Communicator {
public:
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  // The world this process belongs to. Detects an MPI launcher from its environment (Open MPI's
  // OMPI_COMM_WORLD_SIZE, PMI_SIZE of MPICH/Hydra); with more than one rank it loads the plugin
  // ($TFMC_MPI_PLUGIN, else libtfmc_mpi.so beside the executable or in ../lib) and initialises MPI.
  // A launch with several ranks whose plugin cannot be loaded is an error (running N copies of a
  // single-process job would silently train N times), not a fallback.
  static tfmrt::Status create(std::unique_ptr<Communicator> &comm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  const std::string &library() const { return library_; }  // "Open MPI v4.1.4"; "" when single

  // In-place sum over all ranks of the float arrays `parts` (each of `counts[i]` elements), in
  // buckets of at most `bucketFloats` (large parts alone and in place, small ones packed).
  // Blocking: tfmc's entries run to completion, so there is no backward pass to overlap with yet
  // (measured: Open MPI's non-blocking allreduce was 1.2-1.5x slower than the blocking one here).
  // Every rank gets the same bits: Open MPI's allreduce algorithms combine the same partial sums
  // in the same order on every rank (`tfmc train` checks this with weights fingerprints).
  tfmrt::Status allreduceSum(const std::vector<float *> &parts, const std::vector<int64_t> &counts,
                             int64_t bucketFloats = int64_t(1) << 20);
  tfmrt::Status allreduceSum(double *data, int64_t count);
  // values[r] = the value of rank r.
  tfmrt::Status allgather(uint64_t value, std::vector<uint64_t> &values);

  // Ends every rank of the job (MPI_Abort) after this rank failed alone: the others would wait in
  // the next collective forever. The launcher prints the rank and code. No-op when single.
  [[noreturn]] void abortJob(int code);

  // Time spent in allreduceSum since creation (ms), for the per-step figures of `tfmc train`.
  double allreduceMillis() const { return allreduceMillis_; }

private:
  Communicator() = default;
  struct Plugin;
  std::unique_ptr<Plugin> plugin_;
  int rank_ = 0, size_ = 1;
  std::string library_;
  double allreduceMillis_ = 0;
  std::vector<float> bucket_;  // packing of small parts
};

// The world size an MPI launcher announced in the environment, 1 when there is none.
int launcherWorldSize();

// FNV-1a over bytes: the fingerprints ranks compare (artifact, weights, data).
uint64_t fingerprint(const void *data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace tfmdist
