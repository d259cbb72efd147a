// The C interface between tfmc and its MPI plugin (libtfmc_mpi.so). The plugin is the only code
// that includes <mpi.h> and links libmpi; tfmc loads it with dlopen when it was started by an MPI
// launcher, so tfmc builds and runs single-process on machines without MPI. Bump
// TFMC_MPI_PLUGIN_ABI when a signature changes: a stale plugin is then refused, not misused.
#pragma once
#include <stdint.h>

#define TFMC_MPI_PLUGIN_ABI 2

#ifdef __cplusplus
extern "C" {
#endif

// Every call returns 0 on success, otherwise non-zero with a message in err[0..errLen).
int tfmc_mpi_abi(void);
// MPI_Init_thread (FUNNELED: OpenMP threads never call MPI), errors returned rather than fatal.
int tfmc_mpi_init(int *rank, int *size, char *library, int libraryLen, char *err, int errLen);
// In-place sums over all ranks.
int tfmc_mpi_allreduce_sum_f32(float *data, int64_t count, char *err, int errLen);
int tfmc_mpi_allreduce_sum_f64(double *data, int64_t count, char *err, int errLen);
// out[r] = value of rank r (out holds size elements).
int tfmc_mpi_allgather_u64(uint64_t value, uint64_t *out, char *err, int errLen);
int tfmc_mpi_finalize(void);
// Ends every rank of the job (MPI_Abort); the launcher reports the exit code.
void tfmc_mpi_abort(int code);

#ifdef __cplusplus
}
#endif
