#!/usr/bin/env bash
# Data-parallel training on one machine: 2 MPI ranks x 1 thread against 1 process x 2 threads,
# the same global batch (2 token-budget batches per step: --update-freq 2 for the one process),
# the same corpus order, in alternating rounds so machine noise hits both. Prints per-round
# median step times, tokens/s, the allreduce time per step and the load average.
#
#   bench/data_parallel.sh [spec=models/small.yaml] [steps=40] [rounds=2]
#
# Needs a build (scripts/build.sh) and Open MPI (scripts/bootstrap.sh). Works in $WORK
# (default /tmp/tfmc-data-parallel); the tokenizer is made once and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEC=${1:-models/small.yaml}
STEPS=${2:-40}
ROUNDS=${3:-2}
WORK=${WORK:-/tmp/tfmc-data-parallel}
DATA=${DATA:-../shared/data/multi30k}
TFMC=$PWD/build/bin/tfmc
mkdir -p "$WORK"
name=$(basename "$SPEC" .yaml)
vocab=$(sed -n 's/^ *src_vocab_size: *\([0-9]*\).*/\1/p' "$SPEC")
[ -f "$WORK/spm$vocab.model" ] || "$TFMC" tokenizer --data "$DATA" --langs de,en --vocab "$vocab" -o "$WORK/spm$vocab.model"
"$TFMC" compile "$SPEC" --entries=forward,train_step,accumulate -o "$WORK/$name.tfmx" --quiet
common=("$WORK/$name.tfmx" --data "$DATA" --tokenizer "$WORK/spm$vocab.model" --valid-split none --steps "$STEPS"
        --log-every "$STEPS")
echo "spec $SPEC, $STEPS steps per run, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  one=$("$TFMC" train "${common[@]}" --threads 2 --update-freq 2 | grep 'median per step')
  two=$(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMPI_MCA_btl_vader_single_copy_mechanism=none \
          -np 2 "$TFMC" train "${common[@]}" --threads 1 | grep -E 'median per step|per step: gradient allreduce|forward \+ backward')
  echo "round $round  1 process x 2 threads: $one"
  echo "round $round  2 ranks x 1 thread:    $(echo "$two" | head -1)"
  echo "round $round                         $(echo "$two" | grep 'forward + backward' | sed 's/data-parallel: //')"
  echo "round $round                         $(echo "$two" | tail -1 | sed 's/.*fingerprint [0-9a-f]*); //')"
  m1=$(echo "$one" | sed 's/.*steps; \([0-9.]*\) ms median.*/\1/')
  m2=$(echo "$two" | head -1 | sed 's/.*steps; \([0-9.]*\) ms median.*/\1/')
  python3 -c "print('round $round  step time 1x2 / 2x1 = %.3f (> 1: the two ranks are faster)' % ($m1 / $m2))"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
