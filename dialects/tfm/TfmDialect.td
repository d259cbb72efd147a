#ifndef TFM_DIALECT_TD
#define TFM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Tfm_Dialect : Dialect {
  let name = "tfm";
  let summary = "Tensor-level ops for encoder-decoder Transformers";
  let description = [{
    Primitive enough that attention, bias/activation epilogues and residual + LayerNorm are
    separate ops before fusion; every op's gradient is expressible in this dialect. Batch and
    sequence dimensions are dynamic (`?`) and bound by the runtime.
  }];
  let cppNamespace = "::tfm";
}

class Tfm_Op<string mnemonic, list<Trait> traits = []> : Op<Tfm_Dialect, mnemonic, traits>;

#endif
