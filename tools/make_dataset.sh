#!/usr/bin/env bash
# Remakes the shipped dataset: the simulated OM-X moved "by hand" (torque off), recorded at 100 Hz by
# the iknet recorder. dataset/train: 305 s, seed 1; dataset/test: 65 s, seed 7.
# Usage: bash tools/make_dataset.sh [OUTPUT_DIR (default: dataset)]
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/enter_env.sh"
# A domain of its own (tests use 1..101) so nothing else mixes in.
export ROS_DOMAIN_ID=${IKNET_DATASET_DOMAIN_ID:-142}
out=$(realpath -m "${1:-dataset}")
bin=install/lib/iknet
mkdir -p "$out"
staging=$(mktemp -d "$out/.recording.XXXXXX")
pids=()

stop_all() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$staging"' EXIT

record() {  # NAME SEED DURATION_S
  local name=$1 seed=$2 duration=$3
  echo "recording $name: seed $seed, $duration s" >&2
  "$bin/omx_sim" --ros-args -p torque_enabled:=false -p seed:="$seed" -p rate_hz:=100.0 &
  pids+=($!)
  "$bin/recorder" --ros-args -p output_dir:="$staging" -p recording_name:="$name" \
    -p duration:="$duration" -p pose_source:=topic
  stop_all
}

record train 1 305.0
record test 7 65.0
for name in train test; do
  rm -rf "${out:?}/$name"
  mv "$staging/$name" "$out/$name"
done
echo "dataset written to $out" >&2
