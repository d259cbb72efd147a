// Host tensors exchanged with the runtime: model inputs/outputs and weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tfmrt/artifact.h"

namespace tfmrt {

// A dense row-major (C-contiguous) tensor with 64-byte aligned storage. Value semantics: copies
// are deep, moves are cheap. `dtype` and `shape` are plain fields; change them through resize()
// so the storage follows (the runtime rejects tensors whose storage is smaller than their shape).
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // rank 0 is a scalar with one element

  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);  // zero-filled
  Tensor(const Tensor &other);
  Tensor &operator=(const Tensor &other);
  Tensor(Tensor &&other) noexcept;
  Tensor &operator=(Tensor &&other) noexcept;
  ~Tensor();

  // `values` empty -> zeros; otherwise it must hold exactly numel() elements.
  static Tensor f32(std::vector<int64_t> shape, const std::vector<float> &values = {});
  static Tensor i32(std::vector<int64_t> shape, const std::vector<int32_t> &values = {});
  static Tensor boolean(std::vector<int64_t> shape, const std::vector<uint8_t> &values = {});
  // How a largeBuffer's pages are mapped. Both are zero pages the kernel maps on first touch.
  enum class Pages {
    Huge,     // 2 MiB pages where the kernel allows: buffers that are used whole (activation arenas)
    OnTouch,  // 4 KiB pages: buffers sized for the worst case of which a run may touch a part (K/V
              // caches sized for the longest output): untouched pages cost nothing
  };
  // Zero-filled like Tensor(dtype, shape), in a mapping of its own: for long-lived buffers of
  // hundreds of MB, whose first touch on 4 KiB heap pages is slow. Copies are ordinary tensors.
  // Throws std::bad_alloc for more than the machine's physical memory (the mapping itself would
  // succeed, and touching it get the process killed).
  static Tensor largeBuffer(DType dtype, std::vector<int64_t> shape, Pages pages = Pages::Huge);
  // Storage for dtype x shape with unspecified contents: for loaders that overwrite every byte
  // (zeroing first would touch every page twice).
  static Tensor uninitialized(DType dtype, std::vector<int64_t> shape);
  // bf16 from f32 values, each rounded to the nearest bf16 (ties to even).
  static Tensor bf16(std::vector<int64_t> shape, const std::vector<float> &values = {});

  int64_t numel() const;   // product of shape (1 for a scalar); -1 if a dim is negative or it overflows
  size_t nbytes() const;   // numel() * dtypeSize(dtype), 0 if numel() < 0
  size_t capacity() const { return capacity_; }
  // True when every dim is non-negative and the storage covers nbytes().
  bool valid() const;

  // Changes dtype and shape. Storage is kept when large enough (so reusing a tensor for equal
  // shapes never allocates); otherwise it is replaced by zeroed storage (contents are lost).
  void resize(DType dtype, const std::vector<int64_t> &shape);

  template <typename T> T *data() { return reinterpret_cast<T *>(storage_); }
  template <typename T> const T *data() const { return reinterpret_cast<const T *>(storage_); }
  void *rawData() { return storage_; }
  const void *rawData() const { return storage_; }

  std::string describe() const;  // "f32[2, 3]"

  // Storage allocations (heap or mapped) by every tensor of the process so far: tests of steady
  // state check that repeated calls leave it unchanged (operator new never sees this storage).
  static uint64_t storageAllocations();

private:
  enum class Storage { Heap, HugeMapping, OnTouchMapping };
  void allocate(size_t bytes, Storage storage = Storage::Heap, bool zero = true);
  void release();
  uint8_t *storage_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;  // storage_ is an anonymous mapping (largeBuffer), aligned to 2 MiB
};

// The machine's physical memory in bytes (0 if unknown).
uint64_t physicalMemoryBytes();

// bfloat16 is the upper half of an f32: widening is exact; narrowing rounds to nearest, ties to
// even (NaN stays NaN).
inline float bf16ToFloat(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

}  // namespace tfmrt
