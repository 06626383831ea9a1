import numpy as np
import torch
from golden import random_observed_joints

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics, geometric_jacobian


def test_linear_part_equals_autograd():
    for q in random_observed_joints(5, seed=3):
        q = torch.tensor(q)
        expected = torch.autograd.functional.jacobian(
            lambda x: forward_kinematics(OMX_CHAIN, x)[0], q
        )
        np.testing.assert_allclose(geometric_jacobian(OMX_CHAIN, q)[:3], expected, atol=1e-12)


def test_angular_part_equals_autograd_of_rotation():
    for q in random_observed_joints(5, seed=4):
        q = torch.tensor(q)
        rotation = forward_kinematics(OMX_CHAIN, q)[1]
        d_rotation = torch.autograd.functional.jacobian(
            lambda x: forward_kinematics(OMX_CHAIN, x)[1], q
        )
        for joint in range(4):
            # dR/dq_i R^T is the skew matrix of the i-th angular velocity column.
            skew = d_rotation[..., joint] @ rotation.T
            omega = torch.stack([skew[2, 1], skew[0, 2], skew[1, 0]])
            np.testing.assert_allclose(
                geometric_jacobian(OMX_CHAIN, q)[3:, joint], omega, atol=1e-12
            )


def test_batched_jacobian_equals_single_and_numpy_equals_torch():
    q = random_observed_joints(16, seed=5)
    batch = geometric_jacobian(OMX_CHAIN, q)
    assert batch.shape == (16, 6, 4)
    singles = np.stack([geometric_jacobian(OMX_CHAIN, row) for row in q])
    np.testing.assert_allclose(batch, singles, atol=1e-15)
    np.testing.assert_allclose(geometric_jacobian(OMX_CHAIN, torch.from_numpy(q)), batch, 1e-12)
