#!/usr/bin/env bash
# `make demo`: set up, then the whole loop (tools/demo.py); extra arguments go to demo.py.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/enter_env.sh"
python tools/demo.py "$@"
