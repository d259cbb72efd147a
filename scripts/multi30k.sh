#!/usr/bin/env bash
# The Multi30k de->en recipe, end to end: tokenizer, compile, train (checkpoints kept every
# EVERY steps), average the last KEEP checkpoints, translate test_2016_flickr (beam 4 and greedy),
# and score (sacreBLEU-equal BLEU cased and lowercased, chrF2). Writes $OUT/report.md with the wall
# time of each phase and learning.png (loss, validation loss and greedy validation BLEU against
# steps and wall time). Deterministic: the same settings give the same BLEU. The defaults fit the
# 45-minute budget on a 2-core machine (~0.67 s per step of the small model):
#   OUT=multi30k-run bash scripts/multi30k.sh        (STEPS=3400 KEEP=5 EVERY=200 EVAL_EVERY=500)
# PRECISION=bf16 compiles with --precision=bf16 (default f32); PRECISION=int8 with --precision=int8
# (training in f32, translation with int8 GEMMs).
set -euo pipefail
cd "$(dirname "$0")/.."
TFMC=${TFMC:-build/bin/tfmc}
DATA=${DATA:-../shared/data/multi30k}
OUT=${OUT:-multi30k-run}
SPEC=${SPEC:-models/small.yaml}
PRECISION=${PRECISION:-f32}
STEPS=${STEPS:-3400}
KEEP=${KEEP:-5}
EVERY=${EVERY:-200}
EVAL_EVERY=${EVAL_EVERY:-500}
mkdir -p "$OUT"
rm -f "$OUT/metrics.jsonl"  # --metrics appends; a recipe run starts afresh
now() { date +%s.%N; }
phase() { python3 -c "print(f'{$2 - $1:.0f}')"; }

t0=$(now)
[ -f "$OUT/m30k.spm" ] || "$TFMC" tokenizer --data "$DATA" --langs de,en --vocab 8000 -o "$OUT/m30k.spm"
t1=$(now)
"$TFMC" compile "$SPEC" --entries=forward,train_step,translate --precision "$PRECISION" -o "$OUT/model.tfmx" --quiet
"$TFMC" train "$OUT/model.tfmx" --data "$DATA" --src de --tgt en --tokenizer "$OUT/m30k.spm" --steps "$STEPS" \
    --eval-every "$EVAL_EVERY" --checkpoint-every "$EVERY" --save-dir "$OUT/checkpoints" --keep-last "$KEEP" \
    --valid-bleu --metrics "$OUT/metrics.jsonl" --log-every 100 | tee "$OUT/train.log"
t2=$(now)
last=$(ls "$OUT/checkpoints" | sed -n 's/^checkpoint_\([0-9]*\)$/\1/p' | sort -n | tail -n "$KEEP")
"$TFMC" average "$OUT/model.tfmx" $(for s in $last; do echo "$OUT/checkpoints/checkpoint_$s"; done) -o "$OUT/averaged"
t3=$(now)
for ck in averaged checkpoints/checkpoint_last; do
  for beam in 4 1; do
    "$TFMC" translate "$OUT/model.tfmx" --checkpoint "$OUT/$ck" --tokenizer "$OUT/m30k.spm" --data "$DATA" \
        --split test_2016_flickr --beam "$beam" --output "$OUT/test.$(basename $ck).beam$beam.en" \
        > "$OUT/test.$(basename $ck).beam$beam.log" 2>&1
  done
done
t4=$(now)
/usr/bin/python3 scripts/plot_metrics.py "$OUT/metrics.jsonl" -o "$OUT/learning.png" \
    --title "Multi30k de-en, $(basename "$SPEC" .yaml), $STEPS steps" || echo "(no learning curve: see above)"
{
  echo "# Multi30k de->en: $SPEC, $PRECISION, $STEPS steps, average of the last $KEEP checkpoints (every $EVERY steps)"
  echo
  echo "| checkpoint | beam | BLEU | lowercased BLEU | chrF2 |"
  echo "|---|---|---|---|---|"
  for ck in averaged checkpoint_last; do
    for beam in 4 1; do
      log="$OUT/test.$ck.beam$beam.log"
      b=$(sed -n 's/^BLEU = \([0-9.]*\).*/\1/p' "$log"); l=$(sed -n 's/^lowercased BLEU = \([0-9.]*\).*/\1/p' "$log")
      c=$(sed -n 's/^chrF2 = \([0-9.]*\).*/\1/p' "$log")
      echo "| $ck | $beam | $b | $l | $c |"
    done
  done
  echo
  echo "Wall time (s): tokenizer $(phase $t0 $t1), compile + training $(phase $t1 $t2), averaging $(phase $t2 $t3), translation (4 runs) $(phase $t3 $t4), total $(phase $t0 $t4)."
  echo "Signatures: $(sed -n 's/^BLEU = .*\[\(.*\)\]$/\1/p' "$OUT/test.averaged.beam4.log")"
  echo
  echo "Validation (every $EVAL_EVERY steps):"
  echo
  echo '```'
  grep 'validation loss' "$OUT/train.log"
  echo '```'
  echo
  echo "![learning curves](learning.png)"
  echo
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/report.md"
cat "$OUT/report.md"
