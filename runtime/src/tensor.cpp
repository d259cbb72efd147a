#include "tfmrt/tensor.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <new>
#include <utility>

#include "format.h"

namespace tfmrt {

namespace {
constexpr size_t kAlign = 64;  // cache line / AVX-512 vector
constexpr size_t kHugePage = size_t(2) << 20;  // x86-64 transparent huge page
constexpr size_t kPopulateMin = size_t(256) << 10;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// The whole pages inside [p, p + bytes), mapped writable in one call (see allocate()).
void populate(void *p, size_t bytes) {
  const uintptr_t page = 4096, begin = (uintptr_t(p) + page - 1) & ~(page - 1), end = (uintptr_t(p) + bytes) & ~(page - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_POPULATE_WRITE);
}
// Overflow guard: larger shapes count as invalid (numel() == -1) rather than wrapping around.
constexpr int64_t kMaxNumel = int64_t(1) << 56;

template <typename T>
Tensor make(DType dtype, std::vector<int64_t> shape, const std::vector<T> &values) {
  Tensor t(dtype, std::move(shape));
  if (!values.empty()) {
    assert(int64_t(values.size()) == t.numel() && "Tensor factory: values.size() != numel()");
    size_t n = std::min(values.size() * sizeof(T), t.nbytes());
    std::memcpy(t.rawData(), values.data(), n);
  }
  return t;
}
}  // namespace

Tensor::Tensor(DType dtype_, std::vector<int64_t> shape_) : dtype(dtype_), shape(std::move(shape_)) {
  allocate(nbytes());
}

uint64_t physicalMemoryBytes() {
  // Once: Session::run asks at every call (a sysinfo system call each time otherwise).
  static const uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size) : uint64_t(0);
  }();
  return bytes;
}

Tensor Tensor::largeBuffer(DType dtype, std::vector<int64_t> shape, Pages pages) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.allocate(t.nbytes(), pages == Pages::Huge ? Storage::HugeMapping : Storage::OnTouchMapping);
  return t;
}

Tensor Tensor::uninitialized(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.allocate(t.nbytes(), Storage::Heap, /*zero=*/false);
  return t;
}

Tensor::Tensor(const Tensor &o) : dtype(o.dtype), shape(o.shape) {
  allocate(o.capacity_, Storage::Heap, /*zero=*/false);  // every byte is copied
  if (capacity_) std::memcpy(storage_, o.storage_, capacity_);
}

Tensor &Tensor::operator=(const Tensor &o) {
  if (this != &o) {
    Tensor copy(o);
    *this = std::move(copy);
  }
  return *this;
}

Tensor::Tensor(Tensor &&o) noexcept
    : dtype(o.dtype), shape(std::move(o.shape)), storage_(o.storage_), capacity_(o.capacity_), mapped_(o.mapped_) {
  o.storage_ = nullptr;
  o.capacity_ = 0;
  o.mapped_ = false;
  o.shape.clear();
}

Tensor &Tensor::operator=(Tensor &&o) noexcept {
  if (this != &o) {
    release();
    dtype = o.dtype;
    shape = std::move(o.shape);
    storage_ = o.storage_;
    capacity_ = o.capacity_;
    mapped_ = o.mapped_;
    o.storage_ = nullptr;
    o.capacity_ = 0;
    o.mapped_ = false;
    o.shape.clear();
  }
  return *this;
}

Tensor::~Tensor() { release(); }

void Tensor::release() {
  if (mapped_)
    ::munmap(storage_, (capacity_ + kHugePage - 1) / kHugePage * kHugePage);
  else
    std::free(storage_);
  storage_ = nullptr;
  capacity_ = 0;
  mapped_ = false;
}

namespace {
std::atomic<uint64_t> gStorageAllocations{0};
}  // namespace

uint64_t Tensor::storageAllocations() { return gStorageAllocations.load(std::memory_order_relaxed); }

void Tensor::allocate(size_t bytes, Storage storage, bool zero) {
  release();
  if (bytes == 0) return;
  gStorageAllocations.fetch_add(1, std::memory_order_relaxed);
  // Long-lived buffers of hundreds of MB (activation arenas) go on 2 MiB pages where the kernel
  // allows it (THP in "madvise" mode, Debian's default): first touch of 4 KiB pages cost ~3 ms
  // per MB on a VM here (a 360 MB training arena took 1.05 s to zero, more than a whole step).
  // Not for every large tensor: buffers allocated per call got slower on huge pages (measured).
  const bool mapping = storage == Storage::OnTouchMapping || (storage == Storage::HugeMapping && bytes >= kHugePage);
  const size_t align = mapping ? kHugePage : kAlign;
  size_t rounded = (bytes + align - 1) / align * align;
  if (mapping) {
    // Linux maps far more than it has (overcommit) and kills the process when the pages are
    // touched: refuse here, where the caller can still report it (`--beam 100000` was killed).
    const uint64_t physical = physicalMemoryBytes();
    if (physical && rounded > physical) throw std::bad_alloc();
    // A mapping of its own, aligned to 2 MiB: its pages are zero when first touched, so they are
    // neither populated nor cleared here (a K/V cache of 96 MB was zeroed twice, by the kernel
    // and by memset: 0.12-0.16 s of a 2.5 s translation).
    const size_t len = rounded + kHugePage;
    void *raw = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t begin = (uintptr_t(raw) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
    const size_t head = begin - uintptr_t(raw), tail = len - head - rounded;
    if (head) ::munmap(raw, head);
    if (tail) ::munmap(reinterpret_cast<void *>(begin + rounded), tail);
    if (storage == Storage::HugeMapping)
      (void)madvise(reinterpret_cast<void *>(begin), rounded, MADV_HUGEPAGE);  // advice only: else 4 KiB pages
    storage_ = reinterpret_cast<uint8_t *>(begin);
    capacity_ = bytes;
    mapped_ = true;
    return;
  }
  void *p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  // Map every page in one call instead of one page fault per 4 KiB on first touch: on this VM a
  // fault costs ~10 us (a 91 MB checkpoint's tensors: ~0.25 s of faults). Advice only: older
  // kernels refuse it (EINVAL) and the memset faults the pages in as before.
  if (rounded >= kPopulateMin) populate(p, rounded);
  if (zero) std::memset(p, 0, rounded);
  storage_ = static_cast<uint8_t *>(p);
  capacity_ = bytes;
}

Tensor Tensor::f32(std::vector<int64_t> shape, const std::vector<float> &values) {
  return make(DType::F32, std::move(shape), values);
}
Tensor Tensor::i32(std::vector<int64_t> shape, const std::vector<int32_t> &values) {
  return make(DType::I32, std::move(shape), values);
}
Tensor Tensor::boolean(std::vector<int64_t> shape, const std::vector<uint8_t> &values) {
  return make(DType::Bool, std::move(shape), values);
}
Tensor Tensor::bf16(std::vector<int64_t> shape, const std::vector<float> &values) {
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i) halves[i] = floatToBf16(values[i]);
  return make(DType::BF16, std::move(shape), halves);
}

int64_t Tensor::numel() const {
  int64_t n;
  return checkedNumel(shape, kMaxNumel, n) ? n : -1;
}

size_t Tensor::nbytes() const {
  int64_t n = numel();
  return n < 0 ? 0 : size_t(n) * dtypeSize(dtype);
}

bool Tensor::valid() const {
  int64_t n = numel();
  return n >= 0 && size_t(n) * dtypeSize(dtype) <= capacity_;
}

void Tensor::resize(DType newType, const std::vector<int64_t> &newShape) {
  dtype = newType;
  shape = newShape;
  size_t need = nbytes();
  // Grow by at least half: outputs resized per call (encode's memory and cross K/V, whose source
  // length grows batch by batch on a length-sorted test set) were re-allocated, and their fresh
  // pages zeroed by the kernel, at nearly every call.
  if (need > capacity_) allocate(std::max(need, capacity_ + capacity_ / 2));
}

std::string Tensor::describe() const { return std::string(dtypeName(dtype)) + shapeStr(shape); }

}  // namespace tfmrt
