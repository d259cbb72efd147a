#include "kernels/gemm/bf16_weight_copies.h"

#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm {

const uint16_t *Bf16WeightCopies::get(const float *weight, int64_t count, uint64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (version > newest_) {
    // Weights not read during the previous version were replaced or are not used by the entries
    // being run (training: every step is a version): free their copies.
    for (auto it = copies_.begin(); it != copies_.end();)
      it = it->second.version + 1 < version ? copies_.erase(it) : std::next(it);
    newest_ = version;
  }
  Copy &copy = copies_[weight];
  if (copy.count != count || !copy.data.rawData()) {
    copy.data = Tensor::largeBuffer(DType::BF16, {count});
    copy.count = count;
    copy.version = ~uint64_t(0);
  }
  if (copy.version != version) {
    toBf16(weight, count, copy.data.data<uint16_t>());
    copy.version = version;
    ++conversions_;
  }
  return copy.data.data<uint16_t>();
}

}  // namespace tfmrt::gemm
