// libtfmc_mpi.so: tfmc's collectives on MPI (see mpi_plugin.h). Kept to thin wrappers: bucketing,
// consistency checks and error reporting live in tfmdist::Communicator.
#include "mpi_plugin.h"

// C only: the C++ bindings would need symbols of libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>

namespace {

int report(int code, const char *what, char *err, int errLen) {
  if (code == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error %d", code);
  std::snprintf(err, size_t(errLen), "%s failed: %s", what, text);
  return code;
}

// In-place sum over all ranks; MPI counts are int.
int allreduceSum(void *data, int64_t count, MPI_Datatype type, const char *what, char *err, int errLen) {
  if (count < 0 || count > INT_MAX) {
    std::snprintf(err, size_t(errLen), "allreduce of %lld %s exceeds MPI's int count", (long long)count, what);
    return 1;
  }
  return report(MPI_Allreduce(MPI_IN_PLACE, data, int(count), type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce", err,
                errLen);
}

}  // namespace

extern "C" {

int tfmc_mpi_abi(void) { return TFMC_MPI_PLUGIN_ABI; }

int tfmc_mpi_init(int *rank, int *size, char *library, int libraryLen, char *err, int errLen) {
  int provided = 0;
  if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided))
    return report(rc, "MPI_Init_thread", err, errLen);
  // A failed collective (a rank died, a message was truncated) returns an error code that tfmc
  // reports, instead of the default handler ending the process without a word.
  if (int rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN))
    return report(rc, "MPI_Comm_set_errhandler", err, errLen);
  if (int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) return report(rc, "MPI_Comm_rank", err, errLen);
  if (int rc = MPI_Comm_size(MPI_COMM_WORLD, size)) return report(rc, "MPI_Comm_size", err, errLen);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(version, &len) == MPI_SUCCESS) {
    // The first line only ("Open MPI v4.1.4, package: ..." -> up to the comma).
    int n = 0;
    while (n < len && n + 1 < libraryLen && version[n] != ',' && version[n] != '\n') ++n;
    for (int i = 0; i < n; ++i) library[i] = version[i];
    library[n] = 0;
  }
  return 0;
}

int tfmc_mpi_allreduce_sum_f32(float *data, int64_t count, char *err, int errLen) {
  return allreduceSum(data, count, MPI_FLOAT, "floats", err, errLen);
}

int tfmc_mpi_allreduce_sum_f64(double *data, int64_t count, char *err, int errLen) {
  return allreduceSum(data, count, MPI_DOUBLE, "doubles", err, errLen);
}

int tfmc_mpi_allgather_u64(uint64_t value, uint64_t *out, char *err, int errLen) {
  return report(MPI_Allgather(&value, 1, MPI_UINT64_T, out, 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather", err,
                errLen);
}

int tfmc_mpi_finalize(void) { return MPI_Finalize(); }

void tfmc_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

}  // extern "C"
