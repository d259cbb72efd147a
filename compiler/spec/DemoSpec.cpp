// The spec `tfmc demo` compiles when given no file. Same text as models/small.yaml, byte for byte
// (tests/unit/spec/spec_test.cpp checks it): edit both together.
#include "spec/ModelSpec.h"

namespace tfmc {

const char *embeddedDemoSpec() {
  return R"yaml(# Small model sized for Multi30k (29k sentence pairs) on a 2-core CPU: the paper's architecture
# at a quarter of base's width and half its depth. Also the spec `tfmc demo` embeds (its text is
# compiler/spec/DemoSpec.cpp's embeddedDemoSpec(); keep the two identical).
name: small
model:
  d_model: 256
  heads: 4                      # head size 64, as in base
  d_ff: 1024
  encoder_layers: 3
  decoder_layers: 3
  src_vocab_size: 8000          # one joint SentencePiece vocabulary for both languages
  tgt_vocab_size: 8000
  tie_src_tgt_embeddings: true  # needs src_vocab_size == tgt_vocab_size
  tie_output_projection: true   # logits use the decoder's embedding table
  positions: sinusoidal
  max_len: 128                  # longest sequence (tokens) the runtime accepts
  norm: post
  activation: relu
  dropout: 0.1                  # on residual branches and embeddings
  pad_id: 0
  bos_id: 1
  eos_id: 2
training:
  label_smoothing: 0.1
  adam_beta1: 0.9
  adam_beta2: 0.98
  adam_eps: 1.0e-9
  warmup_steps: 1000            # an epoch is ~200 steps at 2048 tokens
  lr_scale: 0.5                 # peak lr = 0.5 * 256^-0.5 * 1000^-0.5 ~ 1e-3
  batch_tokens: 2048            # tokens per training step
  max_steps: 8000               # ~40 epochs
  seed: 1
decoding:
  beam_size: 4
  length_penalty: 0.6
  max_length_ratio: 1.5         # max output length = 1.5 * source length + 10
  max_length_offset: 10
compile:                        # shapes the compiler plans memory for and benchmarks use
  batch: 32
  src_len: 32
  tgt_len: 32
)yaml";
}

}  // namespace tfmc
