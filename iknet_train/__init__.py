"""Data loading, IKNet models, training, testing and export; runs without ROS."""

import iknet_core  # noqa: F401 - before torch loads: sets its OpenMP spin (see there)
