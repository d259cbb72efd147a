// Shared by the reference and fast tfm.label_smoothed_xent kernels: the target check and the
// per-position loss from a row's log-sum-exp, so the two differ only in how they sum a row.
#pragma once

#include <cstdint>
#include <vector>

#include "format.h"
#include "kernels/kernel_util.h"
#include "op_schema.h"

namespace tfmrt::xent {

inline Status checkTargets(const int32_t *targets, int64_t positions, int32_t padId, int64_t V,
                           const std::vector<int64_t> &shape) {
  for (int64_t p = 0; p < positions; ++p)
    if (targets[p] != padId && (targets[p] < 0 || targets[p] >= V))
      return invalidArgument(cat("target id ", targets[p], " at flat position ", p, " of targets ",
                                 shapeStr(shape), " is outside the vocabulary [0, ", V, ")"));
  return Status::OK();
}

// Positions that count towards the mean: targets other than the pad id.
inline int64_t countTargets(const int32_t *targets, int64_t positions, int32_t padId) {
  int64_t count = 0;
  for (int64_t p = 0; p < positions; ++p) count += targets[p] != padId;
  return count;
}

// -(1 - e) log p[y] - (e / V) sum_v log p[v], from lse = log sum_v exp(z_v) and sumZ = sum_v z_v.
inline double positionLoss(double zTarget, double lse, double sumZ, int64_t V, double smoothing) {
  const double logpY = zTarget - lse;
  const double sumLogp = sumZ - double(V) * lse;
  return -(1.0 - smoothing) * logpY - (smoothing / double(V)) * sumLogp;
}

// The attributes every label_smoothed_xent(_grad) kernel reads.
class KernelBase : public Kernel {
public:
  Status prepare(const KernelPrepareInfo &info) override {
    smoothing_ = attrFloat(*info.node, "smoothing");
    padId_ = int32_t(attrInt(*info.node, "pad_id"));
    return Status::OK();
  }

protected:
  double smoothing_ = 0.0;
  int32_t padId_ = 0;
};

}  // namespace tfmrt::xent
