#!/usr/bin/env bash
# The any-arm benchmark: for Panda, UR5 and SO-101 (example-robot-data), 10,000 random reachable
# full poses each (FK of joints uniform in the limits, seed 0), solved at 1e-5 m and 1e-4 rad on
# one thread (iknet's batched refinement on every core), iknet's solvers beside the installed
# peer libraries. Each arm's network is $IKNET_BENCH_MODELS/<arm>.pt (default
# $IKNET_BENCH_OUT/models): trained first when it is not there, as a seed network for
# network+refine: iknet-train's defaults at width 64 ($IKNET_BENCH_TRAIN replaces that flag).
# Width 64 trained in 2-4 min per arm on 2 cores (UR5: 243 s, against 1,069 s at the default
# 128), and refining its seeds was faster (UR5 batched: 164,519 against 126,227 solutions/s).
# Extra arguments go to every iknet-bench run (e.g. --samples 1000 for a quick look).
# Targets: >= 99.95 % solved, single query <= 100 us, batched >= 50,000 solutions/s.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/enter_env.sh"
out=${IKNET_BENCH_OUT:-bench_robots}
models=${IKNET_BENCH_MODELS:-$out/models}
read -ra train_flags <<< "${IKNET_BENCH_TRAIN-"--model-config {\"width\":64}"}"
for robot in panda ur5 so101; do
  model=$models/$robot.pt
  if [[ ! -f $model ]]; then
    echo "[bench_robots] training $model (iknet-train --chain $robot --data ${train_flags[*]})"
    start=$SECONDS
    iknet-train --chain "$robot" --data --no-progress --save-model "$model" \
      --out "$models/$robot" "${train_flags[@]}"
    echo "[bench_robots] trained $model in $((SECONDS - start)) s"
  fi
  iknet-bench --chain "$robot" --model "$model" --samples 10000 --position-tolerance 1e-5 \
    --orientation-tolerance 1e-4 --single-queries 1000 --batch-threads 0 \
    --out "$out/$robot" "$@"
done
