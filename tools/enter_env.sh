# Sourced by the tools/ scripts: set up (idempotent), then enter the iknet environment at the
# repository root with DDS discovery kept on this machine.
# shellcheck shell=bash
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
# colcon's and venv's activation scripts read unset variables.
set +u
# shellcheck disable=SC1091
. ./env.sh
set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
