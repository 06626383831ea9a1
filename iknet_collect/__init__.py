"""Recording demonstrations: the simulated OM-X controller and the recorder node."""

import iknet_core  # noqa: F401 - before torch loads: sets its OpenMP spin (see there)
