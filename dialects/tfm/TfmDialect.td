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

include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Constraints that the runtime shares. tfm-tblgen -gen-op-rules copies the fields named tfm* into
// the op table of dialects/tfm/rules, and the predicates below call the same functions of that
// library as the runtime's checks, so compiler and runtime enforce one rule the same way.
//===----------------------------------------------------------------------===//

defvar Tfm_MaxRank = 8;  // tfm::rules::kMaxRank

// A ranked tensor of one of `elts` (named in `dtypes`, "|"-separated, as tfm::rules::ElementType)
// whose rank is in [minRank, maxRank].
class Tfm_Tensor<list<Type> elts, string dtypes, int minRank, int maxRank>
    : RankedTensorOf<elts, [CPred<"::llvm::cast<::mlir::ShapedType>($_self).getRank() >= " # minRank #
                                   " && ::llvm::cast<::mlir::ShapedType>($_self).getRank() <= " # maxRank>],
                     !if(!eq(minRank, maxRank), "rank " # minRank, "rank " # minRank # ".." # maxRank) #
                     " tensor"> {
  string tfmDtype = dtypes;
  int tfmMinRank = minRank;
  int tfmMaxRank = maxRank;
}
class Tfm_F32<int minRank, int maxRank = minRank> : Tfm_Tensor<[F32], "F32", minRank, maxRank>;
class Tfm_I32<int minRank, int maxRank = minRank> : Tfm_Tensor<[I32], "I32", minRank, maxRank>;
class Tfm_Bool<int minRank, int maxRank = minRank> : Tfm_Tensor<[I1], "Bool", minRank, maxRank>;
// A GEMM operand: f32, or bf16 (products accumulated and returned in f32).
class Tfm_GemmOperand<int minRank, int maxRank = minRank>
    : Tfm_Tensor<[F32, BF16], "F32|BF16", minRank, maxRank>;
// Attention keys and values of decoding (the K/V caches, the encoder's cross K/V): f32, or bf16
// (tfm-lower-kv-precision; read as f32, scores and sums in f32).
class Tfm_KV<int minRank, int maxRank = minRank> : Tfm_Tensor<[F32, BF16], "F32|BF16", minRank, maxRank>;

// An i64 attribute in [lo, hi]; bounds are C++ double expressions (e.g. "::tfm::rules::kInf").
class Tfm_IntIn<string lo, string hi>
    : ConfinedAttr<I64Attr, [AttrConstraint<CPred<"::tfm::rules::intInRange(::llvm::cast<::mlir::IntegerAttr>($_self).getInt(), " #
                                                  lo # ", " # hi # ")">, "in [" # lo # ", " # hi # "]">]> {
  string tfmKind = "Int";
  string tfmMin = lo;
  string tfmMax = hi;
  bit tfmMinOpen = 0;
  bit tfmMaxOpen = 0;
}

// A finite f64 attribute in [lo, hi], with either bound open.
class Tfm_FloatIn<string lo, string hi, bit loOpen = 0, bit hiOpen = 0>
    : ConfinedAttr<F64Attr, [AttrConstraint<CPred<"::tfm::rules::floatInRange(::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble(), " #
                                                  lo # ", " # hi # ", " # loOpen # ", " # hiOpen # ")">,
                                            "in " # !if(loOpen, "(", "[") # lo # ", " # !subst("::tfm::rules::kInf", "inf", hi) # !if(hiOpen, ")", "]")>]> {
  string tfmKind = "Float";
  string tfmMin = lo;
  string tfmMax = hi;
  bit tfmMinOpen = loOpen;
  bit tfmMaxOpen = hiOpen;
}

// A string attribute among comma-separated `choices`.
class Tfm_StrIn<string choices>
    : ConfinedAttr<StrAttr, [AttrConstraint<CPred<"::tfm::rules::oneOf(::llvm::cast<::mlir::StringAttr>($_self).getValue(), \"" #
                                                  choices # "\")">, "one of " # choices>]> {
  string tfmKind = "String";
  string tfmChoices = choices;
}

def Tfm_Positive : Tfm_FloatIn<"0", "::tfm::rules::kInf", 1, 1>;
def Tfm_Probability : Tfm_FloatIn<"0", "1", 0, 1>;  // [0, 1): rates, smoothing, Adam's betas
def Tfm_Count : Tfm_IntIn<"1", "1099511627776">;    // [1, 2^40]: sizes, row counts
def Tfm_Offset : Tfm_IntIn<"0", "1099511627776">;   // [0, 2^40]: column offsets
def Tfm_HeadCount : Tfm_IntIn<"1", "1048576">;      // [1, 2^20]: heads, head_dim
def Tfm_I32Value : Tfm_IntIn<"-2147483648", "2147483647">;  // ids compared with i32 tensors

def Tfm_ShapeRuleVerified : NativeOpTrait<"ShapeRuleVerified"> { let cppNamespace = "::tfm::OpTrait"; }

// An op the compiler may build without a runtime counterpart (weights, states, constant tables).
class Tfm_Op<string mnemonic, list<Trait> traits = []> : Op<Tfm_Dialect, mnemonic, traits> {
  // The function of tfm::rules::shape that gives this op's result shape; ops with one are executed
  // by the runtime and get an entry in its op table.
  string shapeRule = "";
}

// An op the runtime executes. Its result type is inferred by `rule`; the ShapeRuleVerified trait
// checks every built op against the same rule, operand ranks and attribute ranges the runtime uses.
// `typeFromTraits`: ODS already infers the result type from SameOperandsAndResultType or
// AllTypesMatch (the operand's type, which is what the rule gives), so only refinement is added.
class Tfm_ExecOp<string mnemonic, string rule, list<Trait> traits = [], bit typeFromTraits = 0>
    : Tfm_Op<mnemonic, !listconcat(traits, [Tfm_ShapeRuleVerified,
                                            DeclareOpInterfaceMethods<InferTypeOpInterface, ["refineReturnTypes"]>])> {
  let shapeRule = rule;
  let extraClassDefinition = !if(typeFromTraits, "", [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
        ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties properties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes) {
      return ::tfm::inferResultType<$cppClass>(context, location, operands, attributes, properties,
                                               inferredReturnTypes);
    }
  }]) # [{
    // Verification passes the declared types in: ShapeRuleVerified reports a broken rule with
    // one precise error, so inference only runs for builders that leave the type out.
    ::llvm::LogicalResult $cppClass::refineReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
        ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties properties, ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &returnTypes) {
      if (!returnTypes.empty()) return ::mlir::success();
      return inferReturnTypes(context, location, operands, attributes, properties, regions, returnTypes);
    }
  }];
}

#endif
