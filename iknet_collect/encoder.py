"""Dynamixel encoder resolution: joint readings come in whole ticks."""

from __future__ import annotations

import math

import numpy as np

TICKS_PER_REVOLUTION = 4096
RAD_PER_TICK = 2.0 * math.pi / TICKS_PER_REVOLUTION  # 0.001534 rad


def quantize(q: np.ndarray) -> np.ndarray:
    """Joint angles (rad) rounded to the nearest encoder tick, as the servos report them."""
    return np.round(np.asarray(q, dtype=np.float64) / RAD_PER_TICK) * RAD_PER_TICK
