#include "kernel_registry.h"

namespace tfmrt {

const KernelRegistry &KernelRegistry::builtin() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerReferenceKernels(r);
    registerDnnlKernels(r);
    return r;
  }();
  return registry;
}

void KernelRegistry::add(const KernelKey &key, KernelFactory factory) { kernels_[key] = factory; }

KernelFactory KernelRegistry::find(const KernelKey &key) const {
  auto it = kernels_.find(key);
  return it == kernels_.end() ? nullptr : it->second;
}

std::unique_ptr<Kernel> KernelRegistry::create(const std::string &op, DType dtype, Layout layout,
                                               KernelBackend backend) const {
  if (backend != KernelBackend::Reference)
    if (KernelFactory f = find({op, dtype, layout, backend})) return f();
  if (KernelFactory f = find({op, dtype, layout, KernelBackend::Reference})) return f();
  return nullptr;
}

std::vector<KernelKey> KernelRegistry::keys() const {
  std::vector<KernelKey> out;
  for (const auto &kv : kernels_) out.push_back(kv.first);
  return out;
}

const char *layoutName(Layout layout) {
  switch (layout) {
  case Layout::Plain: return "plain";
  case Layout::Packed: return "packed";
  case Layout::PackedBf16: return "packed_bf16";
  case Layout::PackedInt8: return "packed_int8";
  }
  return "?";
}

const char *backendName(KernelBackend backend) {
  switch (backend) {
  case KernelBackend::Reference: return "reference";
  case KernelBackend::Dnnl: return "dnnl";
  }
  return "?";
}

}  // namespace tfmrt
