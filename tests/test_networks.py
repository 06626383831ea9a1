"""IK networks: shapes, sign-free input, rebuild from (type, config)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.networks import (
    MODELS,
    MultiHypothesisConfig,
    ReferenceConfig,
    build_model,
    config_to_dict,
    joint_arcs,
    pose_features,
)
from iknet_train.synthetic import synthetic_samples


def poses(n: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(synthetic_samples(OMX_CHAIN, n, seed)[0], dtype=torch.float32)


@pytest.mark.parametrize('model_type', sorted(MODELS))
def test_every_model_maps_poses_to_joint_hypotheses(model_type: str) -> None:
    model = build_model(model_type, chain=OMX_CHAIN).eval()
    out = model(poses(5))
    assert out.shape == (5, model.n_hypotheses, 4)
    with pytest.raises(ValueError, match=r'expected poses of shape \(B, 7\), got \(5, 6\)'):
        model(torch.zeros(5, 6))


def test_default_model_gives_the_same_answer_for_q_and_minus_q() -> None:
    model = build_model('iknet').eval()
    model.fit_normalization(poses(256, seed=1))
    target = poses(64)
    flipped = target.clone()
    flipped[:, 3:] *= -1.0

    torch.testing.assert_close(model(target), model(flipped), atol=1e-6, rtol=0)
    torch.testing.assert_close(pose_features(target), pose_features(flipped), atol=1e-7, rtol=0)


def test_default_model_outputs_angles_as_directions() -> None:
    model = build_model('iknet', {'n_hypotheses': 3})
    assert model.unit_vectors(poses(4)).shape == (4, 3, 4, 2)
    angles = model(poses(4))
    assert torch.all(angles.abs() <= torch.pi)


def test_models_rebuild_from_type_and_plain_config() -> None:
    config = config_to_dict(MultiHypothesisConfig(width=32, n_blocks=1))
    model = build_model('iknet', config)
    assert model.config == MultiHypothesisConfig(width=32, n_blocks=1)
    reference = build_model('reference', config_to_dict(ReferenceConfig()))
    assert [m.out_features for m in reference.mlp if isinstance(m, torch.nn.Linear)] == [
        400,
        300,
        200,
        100,
        50,
        4,
    ]
    with pytest.raises(ValueError, match="unknown model type 'big'"):
        build_model('big')
    with pytest.raises(ValueError, match=r"unknown config keys \['depth'\]"):
        build_model('iknet', {'depth': 3})


@pytest.mark.parametrize(
    ('model_type', 'config', 'message'),
    [
        ('mixture', {'n_hypotheses': 0}, 'n_hypotheses must be a whole number >= 1, got 0'),
        ('mixture', {'n_components': 0}, 'n_components must be a whole number >= 1, got 0'),
        # JSON's "false" is a string, and a true one: it would have turned the option on.
        ('mixture', {'position_only': 'false'}, "position_only must be true or false, got 'f"),
        ('iknet', {'width': 64.5}, 'width must be a whole number >= 1, got 64.5'),
        ('iknet', {'n_blocks': -1}, 'n_blocks must be a whole number >= 0, got -1'),
        ('reference', {'hidden': [10, 0]}, 'hidden must be a list of whole numbers >= 1'),
        ('iknet', {'joint_centers': ['a']}, 'joint_centers must be a list of numbers'),
    ],
)
def test_config_values_of_the_wrong_kind_are_refused_naming_the_field(
    model_type: str, config: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=f'{model_type} model config {message}'):
        build_model(model_type, config, OMX_CHAIN)


def test_a_switch_written_as_0_or_1_still_loads_as_a_boolean() -> None:
    # Configs written before the checks, with 1 for true, must keep loading.
    model = build_model('mixture', {'position_only': 1, 'local_frames': 0}, OMX_CHAIN)
    assert model.config.position_only is True and model.config.local_frames is False


def test_normalization_is_fitted_and_checked() -> None:
    model = build_model('iknet')
    model.fit_normalization(poses(500))
    features = model.normalized_features(poses(500))
    np.testing.assert_allclose(features.mean(0).detach(), 0.0, atol=1e-4)
    assert torch.all(model.input_std >= 1e-3)  # R[2, 1] is always 0 on the OM-X
    with pytest.raises(ValueError, match=r'input_mean must have shape \(12,\), got \(9,\)'):
        model.set_normalization({'input_mean': [0.0] * 9, 'input_std': [1.0] * 12})


def test_joint_arcs_keep_every_hypothesis_inside_them() -> None:
    low, high = [-3.5, -1.0, 0.5, -2.0], [3.5, 1.5, 2.0, -1.9]  # a full turn, then arcs
    torch.manual_seed(1)  # the body too: the spread below depends on its weights
    model = build_model('iknet', {'width': 16, 'n_blocks': 1, **joint_arcs(low, high)})
    with torch.no_grad():
        model.head.weight.normal_(0.0, 3.0)
        angles = model(poses(256))
    assert model.config.joint_half_ranges[0] == pytest.approx(math.pi)
    assert (angles[..., 1:] >= torch.tensor(low[1:]) - 1e-6).all()
    assert (angles[..., 1:] <= torch.tensor(high[1:]) + 1e-6).all()
    spread = angles[..., 1:].amax((0, 1)) - angles[..., 1:].amin((0, 1))
    assert (spread > 0.5 * (torch.tensor(high[1:]) - torch.tensor(low[1:]))).all()
    # circle_angles is the inverse the loss uses for recorded joints.
    joints = torch.tensor([[0.3, 0.2, 1.1, -1.95]])
    circle = model.circle_angles(joints)
    unit = torch.stack([circle.cos(), circle.sin()], -1)[:, None]
    torch.testing.assert_close(model.to_angles(unit)[:, 0], joints)


def test_joint_arcs_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match='joint_centers and joint_half_ranges need 4'):
        build_model('iknet', {'joint_centers': [0.0], 'joint_half_ranges': [1.0]})
