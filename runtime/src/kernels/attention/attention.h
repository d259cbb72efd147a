// tfm.fused_attention: shared definitions of the reference kernel and the two "flash" kernels
// (AVX-512 intrinsics, portable C++), plus the driver that splits the op into tasks.
//
// Semantics (dialects/tfm/README.md, "Fused ops"): for batch b, head h, query i < Sq,
//   out[b, i, h*D + c] = sum_j p_ij * v[b, j, v_offset + h*D + c]
//   p_i = softmax_j(scale * <q[b, i, q_offset + h*D :+ D], k[b, j, k_offset + h*D :+ D]>)
// over the keys j < Sk with key_keep[b, j] != 0 and, if causal, j <= i + (Sk - Sq): the causal
// diagonal is aligned to the *end* of the keys, so Sq == Sk is ordinary decoder self-attention and
// Sq < Sk is a chunk of new queries at the end of a key cache (Sq = 1: the last position sees all
// keys). A row with no visible key gives zeros. dropout_rate is identity (inference entries).
//
// q, k, v are read in place with row strides Wq, Wk, Wv: they may all be the same merged QKV
// buffer. Nothing of size Sq x Sk is ever allocated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfmrt {
namespace attention {

struct Params {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  const uint8_t *keep = nullptr;  // [B, Sk], 1 = key visible
  float *out = nullptr;           // [B, Sq, heads * headDim]
  int64_t batch = 0, sq = 0, sk = 0, heads = 0, headDim = 0;
  int64_t qWidth = 0, kWidth = 0, vWidth = 0;     // row strides (elements) of q, k, v
  int64_t qOffset = 0, kOffset = 0, vOffset = 0;  // column of head 0
  float scale = 1.0f;
  bool causal = false;

  int64_t outWidth() const { return heads * headDim; }
  // Key j is causally visible to query i iff j <= i + causalShift().
  int64_t causalShift() const { return sk - sq; }
  const float *qRow(int64_t b, int64_t i, int64_t h) const { return q + (b * sq + i) * qWidth + qOffset + h * headDim; }
  const float *kRow(int64_t b, int64_t j, int64_t h) const { return k + (b * sk + j) * kWidth + kOffset + h * headDim; }
  const float *vRow(int64_t b, int64_t j, int64_t h) const { return v + (b * sk + j) * vWidth + vOffset + h * headDim; }
};

// Tiling shared by both flash kernels (the driver and the scratch size depend on them).
constexpr int64_t kQueryTile = 32;   // query rows per tile: two 16-lane vectors
constexpr int64_t kKeyChunk = 64;    // visible keys per online-softmax step
// A task of several query tiles copies its visible K and V rows of one head into contiguous
// per-thread buffers once (when they take at most this much), and every tile reads those. In
// place, a head's rows are one column block of [B, S, W] rows: W * 4 bytes apart, a power of two
// for the usual widths, so they fall into 1/8 .. 1/32 of the L1/L2 sets and evict each other.
constexpr int64_t kPackMaxBytes = int64_t(8) << 20;

// Per-thread scratch, in floats from the thread's 64-byte aligned base: tile buffers, a list of
// the task's visible keys (index + K/V row pointers), packed K/V rows. Depends on head_dim and the
// task's key range [j0, j1) only (keys = j1 - j0), so the driver (at the larger of its two range
// sizes: not monotone, packing stops past kPackMaxBytes) and the kernels agree on it.
struct ScratchLayout {
  size_t list = 0;   // offset of the key list: int32 idx[Sk], then const float *krow[Sk], *vrow[Sk]
  size_t pack = 0;   // offset of packed K rows [Sk][roundUp16(D)], then V rows (if `packs`)
  size_t total = 0;  // floats per thread (a multiple of 16)
  bool packs = false;
};
ScratchLayout scratchLayout(int64_t headDim, int64_t sk);

// One task: query rows [i0, i1) of head h of batch b against keys [j0, j1). If `m` is null the
// normalised result goes to o (row i0 at o, row stride oStride). Otherwise the partial state of a
// split key range is stored for the driver's merge: o = unnormalised sum_j 2^(s_j - m) v_j, per
// row m = running max of s = log2(e) * scale * q.k (-inf if no key was visible), l = sum 2^(s_j - m).
struct TaskOut {
  float *o = nullptr;
  int64_t oStride = 0;
  float *m = nullptr, *l = nullptr;
};
using TaskFn = void (*)(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                        float *scratch, const TaskOut &out);

void taskAvx512(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                float *scratch, const TaskOut &out);   // attention_avx512.cpp (needs avx512f/vl/dq + fma)
// The same with bf16 dot products (attention_avx512_bf16.cpp; needs AVX512-BF16); odd or large
// head_dim, and tasks whose keys the pack buffer cannot hold, on taskAvx512.
void taskAvx512Bf16(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                    float *scratch, const TaskOut &out);
void taskPortable(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                  float *scratch, const TaskOut &out);  // attention_portable.cpp

enum class Impl { Avx512, Avx512Bf16, Portable };
bool cpuHasAvx512();  // avx512f/vl/dq and fma, checked at run time
bool cpuHasAvx2Fma();  // avx2 and fma: the kernels for CPUs without AVX-512
const char *implName(Impl impl);

// Keys past this many are taken in ranges of this many (from key 0), each range's partial softmax
// state merged afterwards in range order. Fixed, not chosen by load: a row's sums then depend on
// neither how far its sequence is padded, nor the batch, nor the thread count.
constexpr int64_t kSplitKeys = 512;

// Knobs of the driver; defaults are what the runtime uses. Tests force split-K with them.
struct DriverOptions {
  int threads = 0;       // 0 = omp_get_max_threads()
  int64_t splitK = 0;    // key ranges (of equal size); 0 = automatic: ranges of kSplitKeys
  int64_t tilesPerTask = 0;  // query tiles per task; 0 = automatic
  // Key ranges as tasks of their own (1) or in turn inside their query task (0); -1 = automatic:
  // own tasks when the query tasks alone cannot keep every thread busy. Same bits either way.
  int splitTasks = -1;
};

// Grow-only per-call buffers owned by the kernel (steady-state runs do not allocate).
class Workspace {
public:
  ~Workspace();
  float *get(size_t floats);  // 64-byte aligned, contents unspecified

private:
  float *data_ = nullptr;
  size_t size_ = 0;
};

// How the driver splits one call into tasks, and the workspace that takes (per-thread scratch +
// key-split partials). Depends on the shapes and the thread count only.
struct RunPlan {
  int workers = 0;  // 0: nothing to do (an empty dimension)
  int64_t rowsPerTask = 0, nRanges = 0, groups = 0, splits = 1, keysPerSplit = 0, nTasks = 0;
  bool splitTasks = false;  // with splits > 1: a task per (group, key range), else per group
  size_t perThread = 0, perPartial = 0, totalFloats = 0;
};
RunPlan planRun(const Params &p, const DriverOptions &opts = {});
// Workspace bytes run() needs for these shapes (p's pointers are not read).
size_t workspaceBytes(const Params &p, const DriverOptions &opts = {});

// Runs the whole op: tasks over (b, h, query tile[, key range]) in an OpenMP loop, then merges
// the key ranges' partial softmax states (flash-decoding). Key ranges are tasks of their own when
// B*H is too small to occupy every thread (Sq = 1 decoding against long keys).
void run(Impl impl, const Params &p, Workspace &ws, const DriverOptions &opts = {});
// The same with a plan from planRun and a caller-owned, 64-byte aligned workspace of at least
// plan.totalFloats floats.
void runPlanned(Impl impl, const Params &p, const RunPlan &plan, float *workspace);

// The oracle: plain loops, double accumulation, Sq x Sk probabilities row by row.
void reference(const Params &p);

}  // namespace attention
}  // namespace tfmrt
