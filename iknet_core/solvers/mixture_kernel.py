"""The mixture model's sampler compiled with numba, for a few poses at a time.

torch draws a mixture model's samples joint by joint in ~280 small operations per call, and at one
pose dispatch, not arithmetic, sets the time: 4.4 ms for the 16 samples that network+refine
refines, against 51 us for the whole answer from zero on a Panda. This kernel draws the same
distribution (MixtureIKNet.sample: trunk, one head per joint on the pose, the joints drawn before
and the target in the joint's frame, Gumbel-max component picks, oversampling's likeliest kept)
with the heads' products as compiled loops. Its weights are taken from the torch model, which stays
the definition: tests hold the two equal.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba
import numpy as np

from iknet_core.kinematics.transforms import rpy_matrix
from iknet_core.solvers.kernels import ChainArrays, rotate, times_rows, turn
from iknet_core.solvers.network_kernel import (
    embed_pose,
    linear,
    silu_inplace,
    take_matrix,
    trunk_parameters,
    values,
)

if TYPE_CHECKING:  # torch loads only when a model is compiled, not with the kernels
    from iknet_core.networks import MixtureIKNet

# Layout entries after embed_pose's three (n_features, width, n_blocks).
_N_JOINTS, _HEAD_WIDTH, _COMPONENTS, _N_LOCAL = 3, 4, 5, 6
HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(cache=True)
def sample_pose(
    position, rotation, weights, chain_joints, temperature, component_temperature, uniform,
    normal, out,
):  # fmt: skip
    """out (kept, n) rad: samples of one pose (3,), (3, 3) from uniform (drawn, n, M) and
    normal (drawn, n) noise; with drawn > kept, the kept likeliest, likeliest first.
    weights: CompiledMixture.weights; chain_joints: ChainArrays.joints of the model's chain."""
    parameters, joint_map, layout, geometry = weights
    width, n, head_width = layout[1], layout[_N_JOINTS], layout[_HEAD_WIDTH]
    m, n_local = layout[_COMPONENTS], layout[_N_LOCAL]
    drawn, kept = uniform.shape[0], out.shape[0]
    embedding = np.empty(width, dtype=np.float32)
    offset = embed_pose(position, rotation, parameters, layout, embedding)
    # What the joints must still reach, as MixtureIKNet.targets: the target, and for whole poses
    # its rotation and the last joint's origin.
    scale, log_std_bounds = geometry[0], geometry[4:]
    last = np.empty(3)
    for i in range(3):
        last[i] = position[i] - (
            rotation[i, 0] * geometry[1] + rotation[i, 1] * geometry[2]
            + rotation[i, 2] * geometry[3]
        )  # fmt: skip
    frames = np.zeros((drawn, 12))  # per sample: the frame's rotation (row-major) and origin
    for k in (0, 4, 8):
        frames[:, k] = 1.0
    samples = np.empty((drawn, n))
    angles = np.empty((drawn, 2 * n), dtype=np.float32)
    log_likelihood = np.zeros(drawn)
    pose_terms = np.empty(head_width, dtype=np.float32)
    hidden = np.empty((drawn, head_width), dtype=np.float32)
    second = np.empty((drawn, head_width), dtype=np.float32)
    raw = np.empty((drawn, 3 * m), dtype=np.float32)
    zero_bias = np.zeros(3 * m, dtype=np.float32)  # the last layer's bias is added per pick
    for j in range(n):
        inputs = np.empty((drawn, 2 * j + n_local), dtype=np.float32)
        for s in range(drawn):
            inputs[s, : 2 * j] = angles[s, : 2 * j]
            if n_local:
                _enter_joint(chain_joints[j], frames[s])
                _target_features(
                    frames[s], position, rotation, last, scale, n_local, inputs[s, 2 * j :]
                )
        pose_w, offset = take_matrix(parameters, offset, head_width, width)
        first_b, offset = take_matrix(parameters, offset, 1, head_width)
        earlier_w, offset = take_matrix(parameters, offset, head_width, 2 * j + n_local)
        second_w, offset = take_matrix(parameters, offset, head_width, head_width)
        second_b, offset = take_matrix(parameters, offset, 1, head_width)
        third_w, offset = take_matrix(parameters, offset, 3 * m, head_width)
        third_b, offset = take_matrix(parameters, offset, 1, 3 * m)
        linear(pose_w, first_b[0], embedding, pose_terms)
        _affine(inputs, earlier_w, pose_terms, hidden)
        silu_inplace(hidden.reshape(-1))
        _affine(hidden, second_w, second_b[0], second)
        silu_inplace(second.reshape(-1))
        _affine(second, third_w, zero_bias, raw)
        for s in range(drawn):
            value, density = _draw(
                raw[s], third_b[0], m, joint_map[0, j], joint_map[1, j], log_std_bounds,
                temperature, component_temperature, uniform[s, j], normal[s, j], drawn > kept,
            )  # fmt: skip
            samples[s, j] = value
            log_likelihood[s] += density
            angles[s, 2 * j] = math.cos(value)
            angles[s, 2 * j + 1] = math.sin(value)
            if n_local:
                _move_joint(chain_joints[j], frames[s], value)
    if drawn == kept:
        out[:] = samples
        return
    likeliest = np.argsort(-log_likelihood, kind='mergesort')
    for k in range(kept):
        out[k] = samples[likeliest[k]]


@numba.njit(cache=True)
def sample_batch(
    positions, rotations, weights, chain_joints, temperature, component_temperature, uniform,
    normal, out,
):  # fmt: skip
    """sample_pose for every pose: positions (B, 3), rotations (B, 3, 3), uniform (B, drawn, n,
    M), normal (B, drawn, n) -> out (B, kept, n)."""
    for b in range(positions.shape[0]):
        sample_pose(
            positions[b], rotations[b], weights, chain_joints, temperature,
            component_temperature, uniform[b], normal[b], out[b],
        )  # fmt: skip


@numba.njit(cache=True, fastmath=True)
def _affine(x, weight, bias, out):
    """out (S, H) = x (S, K) @ weight (H, K).T + bias (H,): network_kernel.linear for eight rows
    at a time, so that each row of weights is read once per eight samples, not per sample (1,000
    Panda samples of one pose on one thread: 35 -> 26 ms, best of 30, on a host where torch
    took 42). Hand-written as BLAS is reached from numba only through scipy and a thread pool
    that, on a busy 2-core machine, made 1,000 samples 10 times slower."""
    rows, inner = x.shape
    s = 0
    while s + 8 <= rows:
        for i in range(weight.shape[0]):
            t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = bias[i]
            for j in range(inner):
                w = weight[i, j]
                t0 += w * x[s, j]
                t1 += w * x[s + 1, j]
                t2 += w * x[s + 2, j]
                t3 += w * x[s + 3, j]
                t4 += w * x[s + 4, j]
                t5 += w * x[s + 5, j]
                t6 += w * x[s + 6, j]
                t7 += w * x[s + 7, j]
            out[s, i] = t0
            out[s + 1, i] = t1
            out[s + 2, i] = t2
            out[s + 3, i] = t3
            out[s + 4, i] = t4
            out[s + 5, i] = t5
            out[s + 6, i] = t6
            out[s + 7, i] = t7
        s += 8
    for r in range(s, rows):
        linear(weight, bias, x[r], out[r])


@numba.njit(cache=True)
def _draw(
    raw, bias, m, center, half_range, log_std_bounds, temperature, component_temperature,
    uniform, normal, likelihood,
):  # fmt: skip
    """One joint of one sample from its head's output raw (3M,) less its bias: the value (rad),
    and its log density under the mixture where likelihood is asked for (else 0), as
    MixtureIKNet.components and sample. Loops over the M components, no temporary arrays:
    called once per joint and sample, those cost 40 % of its time (7,000 draws: 4.2 -> 2.5 ms;
    1,000 samples of a Panda pose 26.4-27.0 -> 22.7-25.0 ms, one thread, runs in turns)."""
    heaviest = -np.inf
    for c in range(m):
        heaviest = max(heaviest, raw[c] + bias[c])
    best, pick = -np.inf, 0
    for c in range(m):
        logit = raw[c] + bias[c]
        if component_temperature > 0.0:
            gumbel = -math.log(-math.log(max(uniform[c], 1e-12)))
            score = (logit - heaviest) / component_temperature + gumbel
        else:
            score = logit
        if score > best:
            best, pick = score, c
    mean = center + half_range * math.tanh(raw[m + pick] + bias[m + pick])
    log_std = min(max(raw[2 * m + pick] + bias[2 * m + pick], log_std_bounds[0]),
                  log_std_bounds[1])  # fmt: skip
    value = mean + temperature * math.exp(log_std) * normal
    if not likelihood:
        return value, 0.0
    weights = terms = 0.0  # sums of exp(logit - heaviest) and exp(term - top), one pass
    top = -np.inf
    for c in range(m):
        weights += math.exp(raw[c] + bias[c] - heaviest)
        log_std_c = min(max(raw[2 * m + c] + bias[2 * m + c], log_std_bounds[0]),
                        log_std_bounds[1])  # fmt: skip
        z = (value - (center + half_range * math.tanh(raw[m + c] + bias[m + c]))) * math.exp(
            -log_std_c
        )
        term = raw[c] + bias[c] - 0.5 * z * z - log_std_c  # c's log weight and density, unscaled
        if term > top:
            terms, top = terms * math.exp(top - term) + 1.0, term
        else:
            terms += math.exp(term - top)
    return value, top + math.log(terms) - heaviest - math.log(weights) - HALF_LOG_TWO_PI


@numba.njit(cache=True)
def _enter_joint(joint, frame):
    """frame (12,) = rotation rows, origin: to the frame joint (JOINT_ROWS, 3) moves in."""
    r = (frame[0], frame[1], frame[2], frame[3], frame[4], frame[5], frame[6], frame[7],
         frame[8])  # fmt: skip
    dx, dy, dz = rotate(r, joint[0])
    frame[9] += dx
    frame[10] += dy
    frame[11] += dz
    r = times_rows(r, joint, 2)
    for k in range(9):
        frame[k] = r[k]


@numba.njit(cache=True)
def _move_joint(joint, frame, value):
    """frame (12,) after joint turns (rad) or slides (m) by value."""
    r = (frame[0], frame[1], frame[2], frame[3], frame[4], frame[5], frame[6], frame[7],
         frame[8])  # fmt: skip
    if joint[5, 0] > 0.0:
        wx, wy, wz = rotate(r, joint[1])
        frame[9] += wx * value
        frame[10] += wy * value
        frame[11] += wz * value
        return
    r = turn(r, joint[1, 0], joint[1, 1], joint[1, 2], value)
    for k in range(9):
        frame[k] = r[k]


@numba.njit(cache=True)
def _target_features(frame, position, rotation, last, scale, n_local, out):
    """MixtureIKNet.target_features in frame (12,): the target position in it over the arm's
    length, then for whole poses the target rotation in it (row-major) and the last joint's
    origin in it."""
    for i in range(3):
        out[i] = scale * (
            frame[i] * (position[0] - frame[9]) + frame[3 + i] * (position[1] - frame[10])
            + frame[6 + i] * (position[2] - frame[11])
        )  # fmt: skip
    if n_local == 3:
        return
    for i in range(3):
        for k in range(3):
            out[3 + 3 * i + k] = (
                frame[i] * rotation[0, k] + frame[3 + i] * rotation[1, k]
                + frame[6 + i] * rotation[2, k]
            )  # fmt: skip
        out[12 + i] = scale * (
            frame[i] * (last[0] - frame[9]) + frame[3 + i] * (last[1] - frame[10])
            + frame[6 + i] * (last[2] - frame[11])
        )  # fmt: skip


class CompiledMixture:
    """A MixtureIKNet's sampler as numba arrays: (B, 3), (B, 3, 3), count -> (B, count, n)."""

    def __init__(self, model: MixtureIKNet) -> None:
        from iknet_core.networks import MIXTURE_LOG_STD, MixtureIKNet

        if not isinstance(model, MixtureIKNet):
            raise ValueError(f'only MixtureIKNet compiles here, got {type(model).__name__}')
        config = model.config
        # The knobs are read from the model's config at each call, as its forward() does.
        self.model, self.n_joints = model, config.n_joints
        # sample_pose's weights, in its order: the trunk's, then per head its first layer's
        # pose columns and bias, the rest of that layer, the later layers and their biases.
        width = config.width
        head_parameters = []
        for head in model.heads:
            first, second, third = head[0], head[2], head[4]
            head_parameters += [
                first.weight[:, :width], first.bias, first.weight[:, width:],
                second.weight, second.bias, third.weight, third.bias,
            ]  # fmt: skip
        chain = model.chain
        tip = np.zeros(3) if chain is None else rpy_matrix(chain.tip_rpy).T @ chain.tip_xyz
        scale = 1.0 if chain is None else 1.0 / (chain.stretched_length or 1.0)
        self.weights = (
            np.concatenate(
                [values(t, np.float32) for t in (*trunk_parameters(model), *head_parameters)]
            ),
            np.stack([values(model.joint_center, np.float64),
                      values(model.joint_half_range, np.float64)]),
            np.array(
                [model.input_mean.numel(), width, len(model.blocks), config.n_joints,
                 config.head_width, config.n_components, model.n_local],
                dtype=np.int64,
            ),
            np.array([scale, *tip, *MIXTURE_LOG_STD]),
        )  # fmt: skip
        self.chain_joints = (
            np.zeros((config.n_joints, 6, 3)) if chain is None
            else ChainArrays.from_chain(chain).joints
        )  # fmt: skip
        self(np.zeros((1, 3)), np.eye(3)[None], 2, oversampling=1.5)  # compile or load now

    def __call__(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        count: int,
        temperature: float | None = None,
        component_temperature: float | None = None,
        oversampling: float | None = None,
        seed: int = 0,
    ) -> np.ndarray:
        """count samples per pose (B, count, n) rad, as MixtureIKNet.sample with the model
        config's knobs unless given; the same for the same poses, count and seed."""
        from iknet_core.networks import check_sampling

        config = self.model.config
        temperature = config.temperature if temperature is None else temperature
        if component_temperature is None:
            component_temperature = config.component_temperature
        oversampling = config.oversampling if oversampling is None else oversampling
        check_sampling(count, temperature, component_temperature, oversampling)
        drawn = math.ceil(oversampling * count)
        batch = (len(positions), drawn, self.n_joints)
        generator = np.random.default_rng(seed)
        uniform = generator.random((*batch, config.n_components))
        normal = generator.standard_normal(batch)
        out = np.empty((len(positions), count, self.n_joints))
        sample_batch(
            np.ascontiguousarray(positions, dtype=np.float64),
            np.ascontiguousarray(rotations, dtype=np.float64),
            self.weights, self.chain_joints, float(temperature),
            float(component_temperature), uniform, normal, out,
        )  # fmt: skip
        return out
