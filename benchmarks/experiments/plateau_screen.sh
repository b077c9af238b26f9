#!/bin/bash
# The unigram-plateau screen (plateau_screen.md): variants of conf/budget's pretraining recipe
# trained side by side on one GPU by `benchmarks/ablation.py gpu-start`, one process each, on the
# examples that `ablation.py pack --max-examples` sent; prints each variant's held-out accuracies
# and leaves the histories in OUT/screen.tar.
#
#   plateau_screen.sh PACKED WORK OUT STEPS WARMUP VAL_EVERY DEADLINE_S NAME='SETS' ...
#
# SETS: space-separated pretrain_model.* keys for `gpu-start --set` ("" for the recipe itself).
# Run from the repository root on the GPU machine, with omegaconf installed there.
set -u -f
P=$1 W=$2 O=$3 STEPS=$4 WARM=$5 VAL=$6 DEADLINE=$7
shift 7
export PYTHONPATH=src:benchmarks PYTHONUNBUFFERED=1
T0=$(date +%s)
common=(--set pretrain_model.schedule.max_steps=$STEPS --set pretrain_model.schedule.warmup_steps=$WARM
  --set pretrain_model.val_every_n_steps=$VAL --set pretrain_model.checkpoint_every_n_steps=1000000
  --set pretrain_model.num_workers=2)
first= names=()
for variant in "$@"; do
  v=${variant%%=*} sets=()
  for x in ${variant#*=}; do sets+=(--set "$x"); done
  names+=("$v")
  # the variants share the first one's unpacked examples
  if [ -n "$first" ]; then mkdir -p $W/$v/data && ln -sfn $W/$first/data/bert $W/$v/data/bert; else first=$v; fi
  python3 benchmarks/ablation.py gpu-start --packed "$P" --work $W/$v --rows bert "${common[@]}" "${sets[@]}" || exit 1
done
echo "started at +$(( $(date +%s) - T0 )) s"
while [ $(( $(date +%s) - T0 )) -lt $DEADLINE ]; do
  n=0; for v in "${names[@]}"; do [ -f $W/$v/bert/output/metrics.json ] && n=$((n+1)); done
  [ $n -eq ${#names[@]} ] && break
  sleep 5
done
echo "waited until +$(( $(date +%s) - T0 )) s"
python3 - "$W" "$O" <<'PY'
import pathlib
import sys
import tarfile

import pandas as pd

work, out = map(pathlib.Path, sys.argv[1:])
out.mkdir(parents=True, exist_ok=True)
with tarfile.open(out / "screen.tar", "w") as tar:
    for d in sorted(p for p in work.iterdir() if (p / "bert").is_dir()):
        files = ["log.txt", "started.json", "pretrain_model.yml"]
        for f in [*files, "output/history.parquet", "output/metrics.json"]:
            if (d / "bert" / f).is_file():
                tar.add(d / "bert" / f, arcname=f"{d.name}/{f.removeprefix('output/')}")
        history = d / "bert" / "output" / "history.parquet"
        if not history.is_file():
            log = (d / "bert" / "log.txt").read_text(errors="replace")
            print(f"== {d.name}: not finished;", log[-600:])
            continue
        t = pd.read_parquet(history).pivot_table(index="step", columns="metric", values="value")
        speed = t["train/tokens_per_sec"].median() if "train/tokens_per_sec" in t else float("nan")
        print(f"== {d.name}: tokens/s median {speed:.0f}")
        print(t[["val/mlm_accuracy", "val/nsp_accuracy"]].dropna().round(3).T.to_string())
PY
