#!/usr/bin/env bash
# `make test`: set up, lint, then run every test; extra arguments go to pytest.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/enter_env.sh"
ruff check .
ruff format --check .
python -m pytest "$@"
