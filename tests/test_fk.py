import numpy as np
import pytest
import torch
from golden import REFERENCE_JOINTS, REFERENCE_POSES, random_observed_joints

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics, pose_from_joints
from iknet_core.kinematics.transforms import canonical_quaternion, constant, matrix_from_quaternion


def test_fk_reproduces_reference_rows():
    pose = pose_from_joints(OMX_CHAIN, REFERENCE_JOINTS)
    np.testing.assert_allclose(pose[:, :3], REFERENCE_POSES[:, :3], atol=1e-6)
    # q and -q are one orientation: compare canonical forms.
    np.testing.assert_allclose(
        pose[:, 3:], canonical_quaternion(REFERENCE_POSES[:, 3:]), atol=1e-6
    )


def test_rotation_matches_quaternion_of_reference_rows():
    _, rotation = forward_kinematics(OMX_CHAIN, REFERENCE_JOINTS)
    np.testing.assert_allclose(rotation, matrix_from_quaternion(REFERENCE_POSES[:, 3:]), atol=2e-6)


def test_batch_equals_single_calls():
    q = random_observed_joints(64)
    batch = pose_from_joints(OMX_CHAIN, q)
    singles = np.stack([pose_from_joints(OMX_CHAIN, row) for row in q])
    np.testing.assert_allclose(batch, singles, atol=1e-15)
    nested = pose_from_joints(OMX_CHAIN, q.reshape(8, 8, 4)).reshape(64, 7)
    np.testing.assert_allclose(nested, batch, atol=1e-15)


def test_torch_equals_numpy():
    q = random_observed_joints(32, seed=1)
    torch_pose = pose_from_joints(OMX_CHAIN, torch.from_numpy(q)).numpy()
    np.testing.assert_allclose(torch_pose, pose_from_joints(OMX_CHAIN, q), atol=1e-12)


def test_gradients_flow_through_fk():
    q = torch.tensor(random_observed_joints(8, seed=2), requires_grad=True)
    position, rotation = forward_kinematics(OMX_CHAIN, q)
    (position.sum() + rotation.sum()).backward()
    assert q.grad is not None
    assert torch.isfinite(q.grad).all()
    # joint1 turns the arm about z: moving it must change the tip position.
    assert (q.grad[:, 0].abs() > 0).any()


def test_float32_inputs_stay_float32():
    position, rotation = forward_kinematics(OMX_CHAIN, torch.zeros(3, 4, dtype=torch.float32))
    assert position.dtype == torch.float32 and rotation.dtype == torch.float32
    np.testing.assert_allclose(
        position[0].numpy(), [0.012 + 0.024 + 0.124 + 0.126, 0, 0.2045], 1e-6
    )


def test_wrong_joint_count_is_a_clear_error():
    with pytest.raises(ValueError, match=r'expected joints of shape \(\.\.\., 4\).*got \(2, 3\)'):
        forward_kinematics(OMX_CHAIN, np.zeros((2, 3)))


def test_constants_on_an_accelerator_are_made_once() -> None:
    # Each new tensor from the host waits for the device's queue; FK asks for the same few
    # constants every call. The meta device stands in for CUDA here.
    like = torch.empty(1, device='meta')
    first = constant(np.eye(3), like)
    assert first.device.type == 'meta' and first.shape == (3, 3)
    assert constant(np.eye(3), like) is first
    assert constant(np.eye(3), torch.empty(1, device='meta', dtype=torch.float64)) is not first
    assert constant((0.0, 1.0, 0.0), like).shape == (3,)
    on_cpu = constant(np.eye(3), torch.zeros(1))
    assert on_cpu is not constant(np.eye(3), torch.zeros(1))  # plain tensors on the CPU


def test_whole_number_joints_are_taken_as_radians_not_truncated_lengths():
    # constant() takes the joints' dtype: integer joints once made every link length 0 m.
    zeros = pose_from_joints(OMX_CHAIN, np.zeros(4))
    np.testing.assert_array_equal(pose_from_joints(OMX_CHAIN, np.zeros(4, dtype=int)), zeros)
    np.testing.assert_array_equal(pose_from_joints(OMX_CHAIN, [0, 0, 0, 0]), zeros)
    from_torch = pose_from_joints(OMX_CHAIN, torch.zeros(4, dtype=torch.long))
    np.testing.assert_allclose(from_torch.numpy(), zeros)
