"""The IK server node and its command-line client."""

import iknet_core  # noqa: F401 - before torch loads: sets its OpenMP spin (see there)
