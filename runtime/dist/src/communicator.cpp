#include "tfmdist/communicator.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "../plugin/mpi_plugin.h"
#include "tfmrt/files.h"

namespace tfmdist {

using tfmrt::Status;

struct Communicator::Plugin {
  void *handle = nullptr;
  int (*abi)() = nullptr;
  int (*init)(int *, int *, char *, int, char *, int) = nullptr;
  int (*allreduceF32)(float *, int64_t, char *, int) = nullptr;
  int (*allreduceF64)(double *, int64_t, char *, int) = nullptr;
  int (*allgatherU64)(uint64_t, uint64_t *, char *, int) = nullptr;
  int (*finalize)() = nullptr;
  void (*abort)(int) = nullptr;
  bool initialized = false;
  char err[512] = {0};
};

namespace {

int envInt(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v) return 0;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (*end == 0 && n > 0 && n < (1 << 20)) ? int(n) : 0;
}

template <typename F> bool resolve(void *handle, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  return fn != nullptr;
}

}  // namespace

int launcherWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (int n = envInt(name)) return n;
  return 1;
}

uint64_t fingerprint(const void *data, size_t bytes, uint64_t h) {
  const auto *p = static_cast<const unsigned char *>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {  // word at a time: weights are tens of megabytes
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

Communicator::~Communicator() {
  if (plugin_ && plugin_->initialized) plugin_->finalize();
  // The plugin stays loaded: libmpi may have registered exit handlers.
}

Status Communicator::create(std::unique_ptr<Communicator> &comm) {
  comm.reset(new Communicator());
  const int launched = launcherWorldSize();
  if (launched <= 1) return Status::OK();
  std::vector<std::string> candidates;
  if (const char *p = std::getenv("TFMC_MPI_PLUGIN"); p && *p) {
    candidates.push_back(p);
  } else {
    const std::string dir = tfmrt::executableDir();
    candidates = {dir + "/libtfmc_mpi.so", dir + "/../lib/libtfmc_mpi.so"};
  }
  auto plugin = std::make_unique<Plugin>();
  std::string why;
  for (const std::string &path : candidates) {
    plugin->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);  // GLOBAL: Open MPI's own components need libmpi's symbols
    if (plugin->handle) break;
    why += "\n  " + path + ": " + dlerror();
  }
  const std::string advice =
      "install Open MPI (scripts/bootstrap.sh does) and rebuild tfmc, or run without mpirun for one process";
  if (!plugin->handle)
    return tfmrt::unimplemented("started by an MPI launcher with " + std::to_string(launched) +
                                " ranks, but tfmc's MPI plugin could not be loaded:" + why + "\n" + advice);
  Plugin &p = *plugin;
  if (!resolve(p.handle, "tfmc_mpi_abi", p.abi) || p.abi() != TFMC_MPI_PLUGIN_ABI || !resolve(p.handle, "tfmc_mpi_init", p.init) ||
      !resolve(p.handle, "tfmc_mpi_allreduce_sum_f32", p.allreduceF32) ||
      !resolve(p.handle, "tfmc_mpi_allreduce_sum_f64", p.allreduceF64) ||
      !resolve(p.handle, "tfmc_mpi_allgather_u64", p.allgatherU64) || !resolve(p.handle, "tfmc_mpi_finalize", p.finalize) ||
      !resolve(p.handle, "tfmc_mpi_abort", p.abort))
    return tfmrt::unimplemented("tfmc's MPI plugin is from another build (its interface does not match this tfmc): " + advice);
  char library[256] = {0};
  if (p.init(&comm->rank_, &comm->size_, library, sizeof library, p.err, sizeof p.err))
    return tfmrt::internalError(std::string("MPI initialisation failed: ") + p.err);
  p.initialized = true;
  comm->library_ = library;
  comm->plugin_ = std::move(plugin);
  if (comm->size_ != launched)
    return tfmrt::internalError("the launcher announced " + std::to_string(launched) + " ranks but MPI reports " +
                                std::to_string(comm->size_));
  return Status::OK();
}

Status Communicator::allreduceSum(const std::vector<float *> &parts, const std::vector<int64_t> &counts,
                                  int64_t bucketFloats) {
  if (!distributed()) return Status::OK();
  const auto start = std::chrono::steady_clock::now();
  Plugin &p = *plugin_;
  auto sum = [&](float *data, int64_t n) -> Status {
    if (p.allreduceF32(data, n, p.err, sizeof p.err))
      return tfmrt::internalError(std::string("gradient sum across ranks: ") + p.err);
    return Status::OK();
  };
  // Buckets of consecutive parts up to bucketFloats: a part that fills a bucket alone is summed
  // in place; smaller ones are packed together, so a model's many biases and norms cost a few
  // messages, not one each.
  for (size_t i = 0; i < parts.size();) {
    if (counts[i] >= bucketFloats / 2 || i + 1 == parts.size()) {
      TFMRT_RETURN_IF_ERROR(sum(parts[i], counts[i]));
      ++i;
      continue;
    }
    size_t end = i;
    int64_t n = 0;
    while (end < parts.size() && counts[end] < bucketFloats / 2 && n + counts[end] <= bucketFloats) n += counts[end++];
    bucket_.resize(size_t(n));
    for (size_t k = i, at = 0; k < end; at += size_t(counts[k]), ++k)
      std::memcpy(bucket_.data() + at, parts[k], size_t(counts[k]) * sizeof(float));
    TFMRT_RETURN_IF_ERROR(sum(bucket_.data(), n));
    for (size_t k = i, at = 0; k < end; at += size_t(counts[k]), ++k)
      std::memcpy(parts[k], bucket_.data() + at, size_t(counts[k]) * sizeof(float));
    i = end;
  }
  allreduceMillis_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

Status Communicator::allreduceSum(double *data, int64_t count) {
  if (!distributed()) return Status::OK();
  if (plugin_->allreduceF64(data, count, plugin_->err, sizeof plugin_->err))
    return tfmrt::internalError(std::string("sum across ranks: ") + plugin_->err);
  return Status::OK();
}

Status Communicator::allgather(uint64_t value, std::vector<uint64_t> &values) {
  values.assign(size_t(size_), value);
  if (!distributed()) return Status::OK();
  if (plugin_->allgatherU64(value, values.data(), plugin_->err, sizeof plugin_->err))
    return tfmrt::internalError(std::string("exchange across ranks: ") + plugin_->err);
  return Status::OK();
}

void Communicator::abortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (plugin_ && plugin_->initialized) plugin_->abort(code);
  std::_Exit(code);
}

}  // namespace tfmdist
