#!/bin/bash
# PyTorch's own distributed examples, files unchanged, on ember over NCCL (a GPU host with N GPUs):
#
#     EXAMPLES=/path/to/pytorch/examples N=2 bash tools/pytorch_examples/run.sh
#
# `import torch` resolves to ember through alias/ (first on PYTHONPATH); every script is started by
# ember's launcher (python -m ember.distributed.run), as torchrun would start it. The examples are
# not part of this repository (their code is PyTorch's): point EXAMPLES at a checkout of
# https://github.com/pytorch/examples. Each script runs in a scratch copy of its folder (the FSDP2
# example's second run loads the checkpoint its first run wrote). Exit status: failures.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
: "${EXAMPLES:?set EXAMPLES to a pytorch/examples checkout}"
N=${N:-2}
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then  # nccl4py / nvmath carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$ROOT"/.whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$HERE/alias:$(ls -d "$ROOT"/packages/*/src | tr '\n' ':')${PYTHONPATH:-}
WORK=$(mktemp -d)
FAILS=0
run() {  # run <example folder> <script> [args...]
  local dir=$1; shift
  [ -d "$WORK/$dir" ] || { mkdir -p "$WORK/$dir"; cp -r "$EXAMPLES/distributed/$dir/." "$WORK/$dir/"; }
  echo "=== $dir: $*"
  (cd "$WORK/$dir" && timeout 300 python3 -m ember.distributed.run --nproc-per-node "$N" "$@" \
     > "$WORK/out.txt" 2>&1)
  local rc=$?
  tail -3 "$WORK/out.txt"
  echo "rc=$rc"
  [ $rc -eq 0 ] || FAILS=$((FAILS + 1))
}
run tensor_parallelism tensor_parallel_example.py
run tensor_parallelism sequence_parallel_example.py
run ddp-tutorial-series multigpu_torchrun.py 3 1
run ddp-tutorial-series multigpu_torchrun.py 4 1  # resumes from the snapshot
run FSDP2 example.py
run FSDP2 example.py  # loads the checkpoint the first run saved (DTensor API)
run FSDP2 example.py --mixed-precision --explicit-prefetching
run FSDP2 example.py --dcp-api
run FSDP2 example.py --dcp-api  # loads through set_model_state_dict / set_optimizer_state_dict

# N ranks against one: both start from the same checkpoint (written by a 1-rank run, so the N-rank
# run reshards it on load), train the example's 10 steps on the same batches (every rank seeds 0,
# FSDP averages the identical gradients) and save; the saved weights must agree.
one() {  # one <folder> <nproc>: the FSDP2 example in its own scratch copy
  (cd "$WORK/$1" && timeout 300 python3 -m ember.distributed.run --nproc-per-node "$2" example.py \
     > "$WORK/out.txt" 2>&1)
  local rc=$?
  [ $rc -eq 0 ] || { tail -5 "$WORK/out.txt"; echo "rc=$rc"; FAILS=$((FAILS + 1)); }
}
echo "=== FSDP2: $N ranks vs 1 rank from the same checkpoint"
mkdir -p "$WORK/single" && cp -r "$EXAMPLES/distributed/FSDP2/." "$WORK/single/"
one single 1
cp -r "$WORK/single" "$WORK/multi"
one single 1
one multi "$N"
python3 "$HERE/same_weights.py" "$WORK/single" "$WORK/multi" || FAILS=$((FAILS + 1))
echo "$FAILS failed"
exit $FAILS
