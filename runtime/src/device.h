// The device a Model's kernels run on: what KernelPrepareInfo hands them instead of a backend's own
// context (the role IREE's HAL device plays). The fast CPU backend's device owns the oneDNN engine
// and stream (kernels/onednn/onednn_util.h); the reference backend needs none. A GPU backend would
// add its device here and keep the kernel interface.
#pragma once

#include <memory>

#include "tfmrt/status.h"

namespace tfmrt {

class Device {
public:
  virtual ~Device() = default;
  virtual const char *name() const = 0;
};

// The CPU device of KernelBackend::Dnnl (kernels/onednn/cpu_device.cpp).
Status createCpuDevice(std::unique_ptr<Device> &out);

}  // namespace tfmrt
