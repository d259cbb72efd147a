// tfm.fused_attention: task decomposition + OpenMP for the flash kernels, the key-split merge,
// and the plain reference implementation.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "kernels/attention/attention.h"

namespace tfmrt {
namespace attention {
namespace {

// Below this many multiply-adds (B*H*Sq*Sk*head_dim, i.e. half the op's FMAs) a single thread
// beats an OpenMP region: fork/join costs microseconds and stalls for milliseconds on a busy box.
// 2^20 is ~20 us of the kernels' query-lane tiles.
constexpr int64_t kParallelMinMacs = int64_t(1) << 20;
// Enough tasks per thread that dynamic scheduling evens out causal / padded tiles.
constexpr int64_t kTasksPerThread = 4;

constexpr size_t roundUp16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

ScratchLayout scratchLayout(int64_t headDim, int64_t sk) {
  const size_t D = size_t(headDim), keys = size_t(std::max<int64_t>(sk, 0));
  // Tile buffers of the AVX-512 kernels (the largest user): Qt + Ot [D][32], St [kKeyChunk][32].
  // The 16-lane portable kernel needs less.
  const size_t wide = 2 * D * kQueryTile + size_t(kKeyChunk) * kQueryTile;
  ScratchLayout l;
  l.list = roundUp16(wide);
  const size_t listFloats = roundUp16(keys + 4 * keys + 16);  // int32 idx + two 8-byte pointers per key
  l.pack = l.list + listFloats;
  const size_t packFloats = 2 * keys * roundUp16(D);
  l.packs = packFloats * sizeof(float) <= size_t(kPackMaxBytes);
  l.total = l.pack + (l.packs ? packFloats : 0);
  return l;
}

bool cpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
}

bool cpuHasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const char *implName(Impl impl) {
  return impl == Impl::Avx512 ? "avx512" : impl == Impl::Avx512Bf16 ? "avx512_bf16" : "portable";
}

Workspace::~Workspace() { std::free(data_); }

float *Workspace::get(size_t floats) {
  if (floats > size_) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    data_ = static_cast<float *>(std::aligned_alloc(64, bytes));
    if (!data_) throw std::bad_alloc();  // Model::run turns it into a Status
    size_ = floats;
  }
  return data_;
}

RunPlan planRun(const Params &p, const DriverOptions &opts) {
  RunPlan r;
  const int64_t B = p.batch, H = p.heads, Sq = p.sq, Sk = p.sk, D = p.headDim;
  if (B == 0 || H == 0 || Sq == 0 || D == 0) return r;
  const int64_t nQt = (Sq + kQueryTile - 1) / kQueryTile;
  const int threads = std::max(1, opts.threads > 0 ? opts.threads : omp_get_max_threads());
  const bool parallel =
      threads > 1 && B * H * Sq * Sk * D >= kParallelMinMacs;
  r.workers = parallel ? threads : 1;

  // A task is a run of query tiles of one (b, h): the kernel gathers (and packs) the visible K/V
  // rows once per task, so tasks are as long as load balance allows: about kTasksPerThread tasks
  // per thread.
  int64_t tilesPerTask = opts.tilesPerTask;
  if (tilesPerTask <= 0) tilesPerTask = std::max<int64_t>(1, B * H * nQt / (kTasksPerThread * r.workers));
  tilesPerTask = std::min(tilesPerTask, nQt);
  r.rowsPerTask = tilesPerTask * kQueryTile;
  r.nRanges = (nQt + tilesPerTask - 1) / tilesPerTask;  // tasks per (b, h)
  r.groups = B * H * r.nRanges;

  // Key ranges (flash-decoding): keys past kSplitKeys are cut into ranges of that many, whose
  // partial softmax states are merged afterwards. The cut depends on Sk alone; it raises the task
  // count (a task per range) only when the groups cannot keep every thread busy, e.g. a decoder
  // step with Sq = 1 and small B*H against long keys.
  if (opts.splitK > 0) {
    r.splits = std::min(opts.splitK, std::max<int64_t>(Sk, 1));
    r.keysPerSplit = (Sk + r.splits - 1) / r.splits;
  } else {
    r.splits = Sk > kSplitKeys ? (Sk + kSplitKeys - 1) / kSplitKeys : 1;
    r.keysPerSplit = r.splits > 1 ? kSplitKeys : Sk;
  }
  r.splitTasks = r.splits > 1 && (opts.splitTasks >= 0 ? opts.splitTasks == 1 : parallel && r.groups < kTasksPerThread * threads);
  // Ranges hold keysPerSplit keys, one of them Sk % keysPerSplit, any others none. scratchLayout
  // is not monotone in the keys (past kPackMaxBytes it stops packing), so the larger of the two.
  const int64_t partialKeys = r.keysPerSplit > 0 ? Sk % r.keysPerSplit : 0;
  r.perThread = std::max(scratchLayout(D, r.keysPerSplit).total, scratchLayout(D, partialKeys).total);
  r.perPartial = roundUp16(size_t(r.rowsPerTask * D + 2 * r.rowsPerTask));
  r.nTasks = r.splitTasks ? r.groups * r.splits : r.groups;
  // Partial states: every task's (tasks per range), or each thread's current group's.
  const size_t partials = r.splits == 1 ? 0 : r.splitTasks ? size_t(r.nTasks) : size_t(r.splits) * size_t(r.workers);
  r.totalFloats = r.perThread * size_t(r.workers) + r.perPartial * partials;
  return r;
}

size_t workspaceBytes(const Params &p, const DriverOptions &opts) {
  return planRun(p, opts).totalFloats * sizeof(float);
}

void run(Impl impl, const Params &p, Workspace &ws, const DriverOptions &opts) {
  const RunPlan plan = planRun(p, opts);
  if (plan.workers == 0) return;
  runPlanned(impl, p, plan, ws.get(plan.totalFloats));
}

void runPlanned(Impl impl, const Params &p, const RunPlan &plan, float *base) {
  const int64_t H = p.heads, Sq = p.sq, Sk = p.sk, D = p.headDim, outW = p.outWidth();
  const TaskFn task = impl == Impl::Avx512 ? taskAvx512 : impl == Impl::Avx512Bf16 ? taskAvx512Bf16 : taskPortable;
  const int workers = plan.workers;
  const int64_t rowsPerTask = plan.rowsPerTask, nRanges = plan.nRanges, groups = plan.groups;
  const int64_t splits = plan.splits, keysPerSplit = plan.keysPerSplit, nTasks = plan.nTasks;
  const size_t perThread = plan.perThread, perPartial = plan.perPartial;
  float *partials = base + perThread * size_t(workers);

  // Group g -> (b, h, query rows [i0, i1)); ranges are visited last-first so causal tasks (later
  // rows see more keys) start with the longest ones.
  auto decode = [&](int64_t g, int64_t &b, int64_t &h, int64_t &i0, int64_t &i1) {
    const int64_t range = nRanges - 1 - g % nRanges, bh = g / nRanges;
    b = bh / H;
    h = bh % H;
    i0 = range * rowsPerTask;
    i1 = std::min(Sq, i0 + rowsPerTask);
  };
  // Key range s of group g into the partial state at `part`.
  auto partialTask = [&](int64_t g, int64_t s, float *part, float *scratch) {
    int64_t b, h, i0, i1;
    decode(g, b, h, i0, i1);
    const int64_t j0 = std::min(Sk, s * keysPerSplit), j1 = std::min(Sk, j0 + keysPerSplit);  // trailing ranges empty
    task(p, b, h, i0, i1, j0, j1, scratch, TaskOut{part, D, part + rowsPerTask * D, part + rowsPerTask * D + rowsPerTask});
  };
  // Merges group g's partial states (range s at first + s * perPartial), in range order: with
  // M = max_s m_s and w_s = 2^(m_s - M), out = sum_s w_s o_s / sum_s w_s l_s. A row whose visible
  // keys all lie in one range gets exactly that range's o / l, as an unsplit task writes it.
  auto merge = [&](int64_t g, const float *first) {
    int64_t b, h, i0, i1;
    decode(g, b, h, i0, i1);
    for (int64_t r = 0; r < i1 - i0; ++r) {
      float *o = p.out + (b * Sq + i0 + r) * outW + h * D;
      float M = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s < splits; ++s) M = std::max(M, first[perPartial * size_t(s) + size_t(rowsPerTask * D + r)]);
      std::fill(o, o + D, 0.0f);
      if (M == -std::numeric_limits<float>::infinity()) continue;  // no visible key at all
      float L = 0.0f;
      for (int64_t s = 0; s < splits; ++s) {
        const float *part = first + perPartial * size_t(s);
        const float ms = part[rowsPerTask * D + r];
        if (ms == -std::numeric_limits<float>::infinity()) continue;
        const float w = std::exp2(ms - M);
        L += w * part[rowsPerTask * D + rowsPerTask + r];
        for (int64_t d = 0; d < D; ++d) o[d] += w * part[r * D + d];
      }
      const float inv = 1.0f / L;  // L >= 1: the range holding M contributes 2^0 * (l >= 1)
      for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    }
  };

#pragma omp parallel num_threads(workers)
  {
    const int thread = omp_get_thread_num();
    float *scratch = base + perThread * size_t(thread);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nTasks; ++t) {
      if (splits == 1) {
        int64_t b, h, i0, i1;
        decode(t, b, h, i0, i1);
        task(p, b, h, i0, i1, 0, Sk, scratch, TaskOut{p.out + (b * Sq + i0) * outW + h * D, outW, nullptr, nullptr});
      } else if (plan.splitTasks) {
        partialTask(t / splits, t % splits, partials + perPartial * size_t(t), scratch);
      } else {
        float *mine = partials + perPartial * size_t(splits) * size_t(thread);
        for (int64_t s = 0; s < splits; ++s) partialTask(t, s, mine + perPartial * size_t(s), scratch);
        merge(t, mine);
      }
    }
    if (plan.splitTasks) {
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) merge(g, partials + perPartial * size_t(g * splits));
    }
  }
}

void reference(const Params &p) {
  const int64_t B = p.batch, H = p.heads, Sq = p.sq, Sk = p.sk, D = p.headDim, outW = p.outWidth();
  const double ninf = -std::numeric_limits<double>::infinity();
#pragma omp parallel
  {
    std::vector<double> s(static_cast<size_t>(std::max<int64_t>(Sk, 1)));
    std::vector<double> acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          const float *q = p.qRow(b, i, h);
          double mx = ninf;
          for (int64_t j = 0; j < Sk; ++j) {
            const bool visible = p.keep[b * Sk + j] != 0 && !(p.causal && j > i + p.causalShift());
            s[size_t(j)] = ninf;
            if (!visible) continue;
            const float *k = p.kRow(b, j, h);
            double dot = 0.0;
            for (int64_t d = 0; d < D; ++d) dot += double(q[d]) * double(k[d]);
            s[size_t(j)] = double(p.scale) * dot;
            mx = std::max(mx, s[size_t(j)]);
          }
          float *o = p.out + (b * Sq + i) * outW + h * D;
          if (mx == ninf) {  // every key masked
            std::fill(o, o + D, 0.0f);
            continue;
          }
          double sum = 0.0;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t j = 0; j < Sk; ++j) {
            if (s[size_t(j)] == ninf) continue;
            const double e = std::exp(s[size_t(j)] - mx);
            sum += e;
            const float *v = p.vRow(b, j, h);
            for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += e * double(v[d]);
          }
          for (int64_t d = 0; d < D; ++d) o[d] = float(acc[size_t(d)] / sum);
        }
  }
}

}  // namespace attention
}  // namespace tfmrt
