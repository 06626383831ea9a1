"""Reference rows of a real OM-X recording (../shared/FACTS.md)."""

import numpy as np

# joint1..joint4 (rad)
REFERENCE_JOINTS = np.array(
    [
        [-0.124252, -0.248505, 0.733243, 1.070719],
        [-0.207087, -0.372757, 0.263845, -1.395923],
        [0.257709, 0.171806, -0.231631, 1.650563],
        [3.285787, -1.066117, 0.207087, 0.582913],
        [-2.020253, -0.536893, -0.728641, 1.968097],
    ]
)
# x, y, z (m), qx, qy, qz, qw as published on /kinematics_pose
REFERENCE_POSES = np.array(
    [
        [0.114631, -0.012818, 0.022705, 0.043564, 0.700309, -0.044237, 0.711135],
        [0.117014, -0.022063, 0.343655, -0.070636, -0.679745, -0.075456, 0.726129],
        [0.173287, 0.042510, 0.079951, -0.091763, 0.708202, 0.089951, 0.694218],
        [-0.088727, -0.014626, 0.287644, 0.137263, 0.009913, 0.987912, -0.071349],
        [-0.026488, -0.079786, 0.235615, -0.291419, -0.182977, 0.795181, -0.499281],
    ]
)

# Joint ranges seen in real hand-guided recordings (rad), joint1..joint4.
OBSERVED_LOW = np.array([-2.83, -1.48, -1.80, -1.79])
OBSERVED_HIGH = np.array([3.29, 0.76, 1.48, 2.11])


def random_observed_joints(count: int, seed: int = 0) -> np.ndarray:
    """Joint vectors uniformly within the observed hand-guided ranges: (count, 4) rad."""
    return np.random.default_rng(seed).uniform(OBSERVED_LOW, OBSERVED_HIGH, (count, 4))
