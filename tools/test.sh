#!/usr/bin/env bash
# `make test`: set up, lint, then run every test; extra arguments go to pytest.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/enter_env.sh"
ruff check .
ruff format --check .
# Two workers, a module to each at a time (its DDS domain and module fixtures stay together):
# half the time of one on a 2-core machine. IKNET_TEST_WORKERS=0 runs them in this process.
python -m pytest -n "${IKNET_TEST_WORKERS:-2}" --dist loadfile "$@"
