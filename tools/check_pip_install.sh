#!/usr/bin/env bash
# CI: `pip install .` (README, "Without ROS") gives working tools. A fresh venv gets the CPU torch,
# then this checkout (not editable); iknet-test then runs from outside the checkout, on the shipped
# model and test recording that the install put under <venv>/share/iknet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${IKNET_PYTHON:-$(command -v python3.11 || command -v python3)}
torch_version=${IKNET_TORCH_VERSION:-2.13.0}
log() { printf '[iknet pip install check] %s\n' "$*" >&2; }

# Nothing of the ROS or .venv environment may leak in: only the fresh venv counts.
unset PYTHONPATH AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH VIRTUAL_ENV
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv="$tmp/venv"
started=$SECONDS

"$python" -m venv "$venv"
# torch first: a plain `torch` requirement would pull several GB of CUDA libraries.
"$venv/bin/python" -m pip install -qq "torch==$torch_version"
"$venv/bin/python" -m pip install -qq "$root"
log "installed in $((SECONDS - started)) s"

cd "$tmp"
"$venv/bin/iknet-test" --help >/dev/null
# Both shipped models: the network alone, and the small one that seeds network+refine.
"$venv/bin/iknet-test" --timing-queries 10 --plots '' --json "$tmp/network.json"
"$venv/bin/iknet-test" --solver network+refine --timing-queries 10 --plots '' \
  --json "$tmp/refined.json"
"$venv/bin/python" - "$venv" "$tmp/network.json" "$tmp/refined.json" <<'PY'
import json
import sys
from pathlib import Path

venv = Path(sys.argv[1]).resolve()
for name in sys.argv[2:]:
    report = json.loads(Path(name).read_text())
    used = [Path(report['model']), *map(Path, report['data']['recordings'])]
    for path in used:
        assert path.resolve().is_relative_to(venv / 'share' / 'iknet'), f'{path} is not installed'
    assert report['n_samples'] > 0
    print(f"iknet-test --solver {report['solver']} from the pip install ({Path(report['model']).name}): "
          f"{report['n_samples']} poses, median {report['position_error_mm']['median']:.3f} mm")
PY
log "passed in $((SECONDS - started)) s"
