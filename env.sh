# Source this file (`. ./env.sh`) for a shell in the iknet environment that `make test` set up:
# the .venv, ROS 2 (a sourced distro, or Kilted from PyPI) and the colcon install of iknet.
# shellcheck shell=bash
IKNET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export IKNET_ROOT
. "$IKNET_ROOT/.venv/bin/activate"
if [ -z "${ROS_DISTRO:-}" ]; then
  export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # Kilted from PyPI is a local environment: keep DDS discovery on this machine.
  export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
fi
if [ -f "$IKNET_ROOT/install/setup.sh" ]; then
  COLCON_CURRENT_PREFIX="$IKNET_ROOT/install" . "$IKNET_ROOT/install/setup.sh"
fi
