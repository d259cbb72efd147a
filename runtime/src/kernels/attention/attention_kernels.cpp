// tfm.fused_attention kernels: "reference.fused_attention" (Reference backend) and the flash
// kernel of the Dnnl backend, "fast.fused_attention_avx512", "fast.fused_attention_avx512_bf16"
// (precision "bf16") or "fast.fused_attention_portable".
//
// Which flash kernel a node gets is decided once, in prepare(): AVX-512 when the CPU has
// avx512f/vl/dq + fma (its bf16 variant for precision "bf16" when the CPU also has AVX512-BF16
// and no AMX), else portable. The environment variable TFMRT_ATTENTION_IMPL=portable|avx512|avx512_bf16
// overrides it (benchmarks, tests; asking for an ISA the CPU lacks is a load error; avx512_bf16
// leaves nodes of precision f32 on the f32 AVX-512 kernel).
#include <cstdlib>
#include <cstring>

#include "format.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/kernel_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

attention::Params paramsFor(const Node &node) {
  attention::Params p;
  p.heads = attrInt(node, "heads");
  p.headDim = attrInt(node, "head_dim");
  p.qOffset = attrInt(node, "q_offset");
  p.kOffset = attrInt(node, "k_offset");
  p.vOffset = attrInt(node, "v_offset");
  p.scale = float(attrFloat(node, "scale"));
  p.causal = attrInt(node, "causal") != 0;
  // dropout_rate: identity in inference entries (the training issue adds the RNG).
  return p;
}

// Binds the concrete tensors of one call (shapes were checked by shape inference, including
// offset + heads * head_dim <= width for q, k and v).
void bind(attention::Params &p, const KernelArgs &a) {
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2], &keep = a.inputs[3];
  p.q = q.as<float>();
  p.k = k.as<float>();
  p.v = v.as<float>();
  p.keep = keep.as<uint8_t>();
  p.out = a.outputs[0].as<float>();
  p.batch = q.dim(0);
  p.sq = q.dim(1);
  p.sk = k.dim(1);
  p.qWidth = q.dim(2);
  p.kWidth = k.dim(2);
  p.vWidth = v.dim(2);
}

class ReferenceFusedAttentionKernel final : public Kernel {
public:
  const char *name() const override { return "reference.fused_attention"; }
  Status prepare(const KernelPrepareInfo &info) override {
    params_ = paramsFor(*info.node);
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    attention::Params params = params_;  // the node's attributes, bound to this call's operands
    bind(params, a);
    attention::reference(params);
    return Status::OK();
  }

private:
  attention::Params params_;
};

class FlashAttentionKernel final : public Kernel {
public:
  const char *name() const override {
    return impl_ == attention::Impl::Avx512       ? "fast.fused_attention_avx512"
           : impl_ == attention::Impl::Avx512Bf16 ? "fast.fused_attention_avx512_bf16"
                                                  : "fast.fused_attention_portable";
  }
  Status prepare(const KernelPrepareInfo &info) override {
    params_ = paramsFor(*info.node);
    const bool avx512 = attention::cpuHasAvx512();
    // precision "bf16" (tfm-lower-precision): bf16 dot products where the CPU has AVX512-BF16 (and
    // oneDNN's ISA cap allows it, as for the GEMMs); f32 otherwise. Also f32 on CPUs with AMX
    // (Intel Xeon since Sapphire Rapids): vdpbf16ps runs at half the f32 FMA rate there, and the
    // bf16 kernel was the slower one (attention_bench, 5 alternating rounds on a Xeon with AMX:
    // B = 1, S = 1024 18.1-28.7 vs 11.6-14.5 ms; B = 32, S = 256 38.9-49.6 vs 26.2-34.1 ms).
    const bool bf16Node = attrString(*info.node, "precision") == "bf16";
    const bool bf16 = bf16Node && avx512 && gemm::cpuHasAvx512Bf16() && !gemm::cpuHasAmxBf16();
    impl_ = bf16 ? attention::Impl::Avx512Bf16 : avx512 ? attention::Impl::Avx512 : attention::Impl::Portable;
    if (const char *env = std::getenv("TFMRT_ATTENTION_IMPL"); env && *env && std::strcmp(env, "auto") != 0) {
      if (std::strcmp(env, "portable") == 0) {
        impl_ = attention::Impl::Portable;
      } else if (std::strcmp(env, "avx512") == 0) {
        if (!avx512) return invalidArgument("TFMRT_ATTENTION_IMPL=avx512 but this CPU lacks avx512f/vl/dq + fma");
        impl_ = attention::Impl::Avx512;
      } else if (std::strcmp(env, "avx512_bf16") == 0) {
        if (!avx512 || !gemm::cpuHasAvx512Bf16())
          return invalidArgument("TFMRT_ATTENTION_IMPL=avx512_bf16 but this CPU lacks AVX512-BF16 (or oneDNN's ISA is capped)");
        // Only where the node asked for bf16: an f32 artifact's attention stays f32.
        impl_ = bf16Node ? attention::Impl::Avx512Bf16 : attention::Impl::Avx512;
      } else {
        return invalidArgument(
            cat("TFMRT_ATTENTION_IMPL must be auto, avx512, avx512_bf16 or portable, got '", env, "'"));
      }
    }
    return Status::OK();
  }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int threads) const override {
    attention::Params p = params_;
    p.batch = (*in[0])[0];
    p.sq = (*in[0])[1];
    p.sk = (*in[1])[1];
    return attention::workspaceBytes(p, {threads});
  }
  Status run(const KernelArgs &a) const override {
    attention::Params params = params_;  // the node's attributes, bound to this call's operands
    bind(params, a);
    // Per-thread tiles + key-split partials in the plan's scratch (sized by scratchBytes above).
    const attention::RunPlan plan = attention::planRun(params);
    if (plan.workers == 0) return Status::OK();
    if (plan.totalFloats * sizeof(float) > a.scratchBytes)
      return internalError(cat("scratch of ", a.scratchBytes, " bytes, needs ", plan.totalFloats * sizeof(float)));
    attention::runPlanned(impl_, params, plan, static_cast<float *>(a.scratch));
    return Status::OK();
  }

private:
  attention::Params params_;
  attention::Impl impl_ = attention::Impl::Portable;
};

}  // namespace

void registerReferenceAttention(KernelRegistry &r) {
  r.add({"tfm.fused_attention", DType::F32, Layout::Plain, KernelBackend::Reference},
        makeKernel<ReferenceFusedAttentionKernel>);
}

void registerFastAttention(KernelRegistry &r) {
  r.add({"tfm.fused_attention", DType::F32, Layout::Plain, KernelBackend::Dnnl}, makeKernel<FlashAttentionKernel>);
}

}  // namespace tfmrt
