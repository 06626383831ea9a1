#!/usr/bin/env bash
# `make test`: set up, lint, then run every test; extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/setup.sh
# colcon's and venv's activation scripts read unset variables.
set +u
# shellcheck disable=SC1091
. ./env.sh
set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
ruff check .
ruff format --check .
python -m pytest "$@"
