"""Training objectives, one per model type: loss(model, poses, joints) -> (loss, figures).

Ours measures what users care about (end-effector error through the differentiable FK) and lets
each pose be answered by whichever of the K hypotheses fits it best (winner takes all), so two
valid solutions (elbow up and down) are never averaged into an invalid one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.networks import IKNetwork, MixtureIKNet, MultiHypothesisIKNet

# Position error is measured in units of this length (m): 1 mm then weighs like 10 mrad of
# orientation error, roughly the tip displacement of a joint error at the arm's reach.
POSITION_SCALE_M = 0.1
# How strongly the winning hypothesis is pulled to the recorded joints (the FK terms decide
# the accuracy; this one only speeds up the start).
JOINT_WEIGHT = 0.1
# Share of the FK loss that every hypothesis gets, so none is left unused.
ALL_HYPOTHESES_WEIGHT = 0.05
# Keeps the (cos, sin) outputs near the unit circle, where atan2 is well conditioned.
UNIT_WEIGHT = 0.01
# Samples per pose whose FK error a mixture model trains on (--sample-fk-weight).
SAMPLES_PER_POSE = 2

Figures = dict[str, torch.Tensor]
Loss = Callable[[IKNetwork, Chain, torch.Tensor, torch.Tensor], tuple[torch.Tensor, Figures]]


def multi_hypothesis_loss(
    model: IKNetwork, chain: Chain, poses: torch.Tensor, joints: torch.Tensor
) -> tuple[torch.Tensor, Figures]:
    """Winner-takes-all FK loss; poses (B, 7), joints (B, n) -> scalar, {'position_mm': (B,)}."""
    if not isinstance(model, MultiHypothesisIKNet):
        raise ValueError(f'multi_hypothesis_loss needs a MultiHypothesisIKNet, got {type(model)}')
    raw = model.unit_vectors(poses).float()  # (B, K, n, 2); the network may run in half precision
    with full_precision(poses):
        return _multi_hypothesis_terms(model, chain, poses, joints, raw)


def _multi_hypothesis_terms(
    model: MultiHypothesisIKNet,
    chain: Chain,
    poses: torch.Tensor,
    joints: torch.Tensor,
    raw: torch.Tensor,
) -> tuple[torch.Tensor, Figures]:
    length = raw.norm(dim=-1)
    unit = raw / length.clamp_min(1e-6)[..., None]
    angles = model.to_angles(unit)  # (B, K, n)
    circle = model.circle_angles(joints)
    target_unit = torch.stack([circle.cos(), circle.sin()], -1)[:, None]  # (B, 1, n, 2)
    joint_term = (unit - target_unit).square().sum((-1, -2))  # ~ sum of squared joint errors

    position, rotation = forward_kinematics(chain, angles)  # (B, K, 3), (B, K, 3, 3)
    target_rotation = matrix_from_quaternion(poses[:, 3:])[:, None]
    position_error = (position - poses[:, None, :3]).norm(dim=-1)  # (B, K) m
    rotation_term = (rotation - target_rotation).square().sum((-1, -2))  # ~ 2 angle^2
    fk_term = (position_error / POSITION_SCALE_M).square() + rotation_term

    best = (fk_term + JOINT_WEIGHT * joint_term).min(1).values
    loss = (
        best.mean()
        + ALL_HYPOTHESES_WEIGHT * fk_term.mean()
        + UNIT_WEIGHT * (length - 1.0).square().mean()
    )
    best_position = position_error.detach().min(1).values
    return loss, {'position_mm': best_position * 1000.0}


def reference_loss(
    model: IKNetwork, chain: Chain, poses: torch.Tensor, joints: torch.Tensor
) -> tuple[torch.Tensor, Figures]:
    """The reference IKNet's loss: L2 norm of the joint error over the batch / batch size."""
    predicted = model(poses)[:, 0].float()
    with full_precision(poses):
        loss = (predicted - joints).norm() / len(poses)
        with torch.no_grad():
            position, _ = forward_kinematics(chain, predicted)
            position_error = (position - poses[:, :3]).norm(dim=-1)
    return loss, {'position_mm': position_error * 1000.0}


def mixture_loss(
    model: IKNetwork,
    chain: Chain,
    poses: torch.Tensor,
    joints: torch.Tensor,
    sample_fk_weight: float = 0.0,
) -> tuple[torch.Tensor, Figures]:
    """Negative log-likelihood of the recorded joints (nats per pose), plus sample_fk_weight
    times the FK error of the model's own samples (sample_fk_error; in validation, of the same
    draws each time, so that the model kept is the best at what it was trained for); in
    validation (no gradients) the figure is FK's position error of one sample per pose at the
    model's temperature, which training steps would only throw away."""
    if not isinstance(model, MixtureIKNet):
        raise ValueError(f'mixture_loss needs a MixtureIKNet, got {type(model)}')
    loss = -model.log_likelihood(poses, joints).mean()
    training = torch.is_grad_enabled()
    if sample_fk_weight > 0.0:
        generator = None if training else torch.Generator(device=poses.device).manual_seed(1)
        loss = loss + sample_fk_weight * sample_fk_error(model, chain, poses, generator)
    if training:
        return loss, {}
    with full_precision(poses):
        generator = torch.Generator(device=poses.device).manual_seed(0)
        sample = model.sample(
            poses,
            1,
            temperature=model.config.temperature,
            generator=generator,
            component_temperature=model.config.component_temperature,
        )[:, 0]
        position, _ = forward_kinematics(chain, sample.float())
        position_error = (position - poses[:, :3]).norm(dim=-1)
    return loss, {'position_mm': position_error * 1000.0}


def sample_fk_error(
    model: MixtureIKNet,
    chain: Chain,
    poses: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Mean FK error of SAMPLES_PER_POSE samples of each pose at the model's temperatures:
    position over POSITION_SCALE_M plus the rotations' Frobenius distance, not squared, so the
    tail pulls without swamping. The likelihood trains each joint on the true joints before it
    (teacher forcing); this trains the sampler as it runs, each joint after the model's own
    earlier draws, and reaches a far-off sample's early joints through the later ones (on the
    Panda it cut the mean raw-sample error by 19 % in the same time; README). For a model of
    positions, the position alone."""
    config = model.config
    samples = model.sample(
        poses,
        SAMPLES_PER_POSE,
        config.temperature,
        generator,
        component_temperature=config.component_temperature,
    )
    with full_precision(poses):
        position, rotation = forward_kinematics(chain, samples.float())
        error = (position - poses[:, None, :3].float()).norm(dim=-1) / POSITION_SCALE_M
        if not config.position_only:
            target = matrix_from_quaternion(poses[:, 3:].float())[:, None]
            # |R - R_target|_F = 2 sqrt(2) sin(angle / 2): sqrt(2) times the angle, to first order.
            error = error + (rotation - target).square().sum((-1, -2)).add(1e-12).sqrt()
        return error.mean()


def full_precision(like: torch.Tensor) -> torch.autocast:
    """Mixed precision off: FK for millimetre errors needs float32 even when the network's
    forward pass runs in float16 or bfloat16 (`iknet-train --amp`)."""
    return torch.autocast(like.device.type, enabled=False)


LOSSES: dict[str, Loss] = {
    'iknet': multi_hypothesis_loss,
    'reference': reference_loss,
    'mixture': mixture_loss,
}
