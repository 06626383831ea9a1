#!/usr/bin/env bash
# `make demo`: set up, then the whole loop (tools/demo.py); extra arguments go to demo.py.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/setup.sh
# colcon's and venv's activation scripts read unset variables.
set +u
# shellcheck disable=SC1091
. ./env.sh
set -u
# A demo talks to its own simulator only: keep DDS on this machine.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
python tools/demo.py "$@"
