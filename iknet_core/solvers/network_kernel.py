"""The multi-hypothesis IK network's forward pass compiled with numba, for single queries.

At batch size 1 torch spends ~150 us per call on dispatch alone; this kernel computes the same
function (features from the rotation matrix, normalization, residual MLP, atan2 heads) in tens of
microseconds. Its weights are taken from the torch model, which stays the definition: tests hold
the two equal.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba
import numpy as np

if TYPE_CHECKING:  # torch loads only when a network is compiled, not with the kernels
    import torch

    from iknet_core.networks import IKNetwork, MultiHypothesisIKNet

LAYER_NORM_EPS = 1e-5


# Kernels whose loops divide: numpy's error model drops numba's ZeroDivisionError check, which
# otherwise keeps LLVM from vectorizing them.
VECTOR = {'cache': True, 'fastmath': True, 'error_model': 'numpy'}
# exp(-x) for SiLU as exp(t / 2**SQUARINGS) ** (2**SQUARINGS): a polynomial and squarings that
# vectorize (numba's math.exp is a scalar libm call per element, ~4 ns, half the forward pass
# at width 128). Past |x| = 40, SiLU is x or 0 to float32 precision, so x is clamped there.
SQUARINGS = 7
EXP_CLAMP = 40.0


@numba.njit(**VECTOR, inline='always')
def _silu(x):
    """x * sigmoid(x) to float32 precision, in float64: within 1 float32 ulp (relative 7e-8)
    for |x| <= 40; below -40, x / (1 + e**40), |x| * 4e-18 where the true value is smaller."""
    t = min(max(-np.float64(x), -EXP_CLAMP), EXP_CLAMP) * (1.0 / 2**SQUARINGS)
    # Taylor series of exp(t) to t**8, |t| <= 0.3125: relative error 6e-11, 8e-9 once squared.
    e = 1.0 + t * (
        1.0 + t * (1 / 2 + t * (1 / 6 + t * (1 / 24 + t * (1 / 120 + t * (
            1 / 720 + t * (1 / 5040 + t * (1 / 40320))
        )))))
    )  # fmt: skip
    for _ in range(SQUARINGS):
        e *= e
    return np.float32(x / (1.0 + e))


@numba.njit(cache=True, fastmath=True)
def linear(weight, bias, x, out):
    for i in range(weight.shape[0]):
        total = bias[i]
        for j in range(weight.shape[1]):
            total += weight[i, j] * x[j]
        out[i] = total


@numba.njit(**VECTOR)
def _layer_norm_silu(x, gain, shift, out):
    mean = 0.0
    for value in x:
        mean += value
    mean /= x.shape[0]
    variance = 0.0
    for value in x:
        variance += (value - mean) * (value - mean)
    scale = 1.0 / math.sqrt(variance / x.shape[0] + LAYER_NORM_EPS)
    for i in range(x.shape[0]):
        out[i] = _silu((x[i] - mean) * scale * gain[i] + shift[i])


@numba.njit(**VECTOR)
def silu_inplace(x):
    for i in range(x.shape[0]):
        x[i] = _silu(x[i])


@numba.njit(cache=True)
def _features(position, rotation, mean, std, out):
    """Same order as networks.pose_features, as many as out holds: p (3, a position-only
    mixture model's), (R[i, 0], R[i, 1]) per row (9), R^T p (12, tool_frame_features)."""
    for i in range(3):
        out[i] = position[i]
        if out.shape[0] > 3:
            out[3 + 2 * i] = rotation[i, 0]
            out[4 + 2 * i] = rotation[i, 1]
    if out.shape[0] > 9:
        for j in range(3):
            out[9 + j] = (
                rotation[0, j] * position[0]
                + rotation[1, j] * position[1]
                + rotation[2, j] * position[2]
            )
    for i in range(out.shape[0]):
        out[i] = (out[i] - mean[i]) / std[i]


@numba.njit(cache=True)
def take_matrix(parameters, offset, rows, columns):
    """The (rows, columns) matrix stored at offset in the flat parameters, and the next offset."""
    end = offset + rows * columns
    return parameters[offset:end].reshape((rows, columns)), end


@numba.njit(cache=True)
def embed_pose(position, rotation, parameters, layout, out):
    """One pose (3,), (3, 3) -> out (width,) float32: the trunk (features, normalization,
    stem, residual blocks) through its final layer norm and SiLU, which every model here shares;
    returns the offset in parameters where the trunk's end (trunk_parameters' order).
    layout: n_features, width, n_blocks, ..."""
    n_features, width, n_blocks = layout[0], layout[1], layout[2]
    normalization, offset = take_matrix(parameters, 0, 2, n_features)
    stem_w, offset = take_matrix(parameters, offset, width, n_features)
    stem_b, offset = take_matrix(parameters, offset, 1, width)
    features = np.empty(n_features, dtype=np.float32)
    x = np.empty(width, dtype=np.float32)
    h = np.empty(width, dtype=np.float32)
    g = np.empty(width, dtype=np.float32)
    _features(position, rotation, normalization[0], normalization[1], features)
    linear(stem_w, stem_b[0], features, x)
    for _ in range(n_blocks):
        norm, offset = take_matrix(parameters, offset, 2, width)
        fc1_w, offset = take_matrix(parameters, offset, width, width)
        fc1_b, offset = take_matrix(parameters, offset, 1, width)
        fc2_w, offset = take_matrix(parameters, offset, width, width)
        fc2_b, offset = take_matrix(parameters, offset, 1, width)
        _layer_norm_silu(x, norm[0], norm[1], h)
        linear(fc1_w, fc1_b[0], h, g)
        silu_inplace(g)
        linear(fc2_w, fc2_b[0], g, h)
        for i in range(width):
            x[i] += h[i]
    final_norm, offset = take_matrix(parameters, offset, 2, width)
    _layer_norm_silu(x, final_norm[0], final_norm[1], out)
    return offset


@numba.njit(cache=True)
def forward_pose(position, rotation, weights, out):
    """One pose (3,), (3, 3) -> out (K, n) rad; weights: CompiledNetwork.weights. A kernel of
    its own so that other kernels run the network inside (refined.py)."""
    parameters, joint_map, layout = weights
    width, n_hypotheses, n_joints = layout[1], layout[3], layout[4]
    n_outputs = 2 * n_hypotheses * n_joints
    h = np.empty(width, dtype=np.float32)
    y = np.empty(n_outputs, dtype=np.float32)
    offset = embed_pose(position, rotation, parameters, layout, h)
    head_w, offset = take_matrix(parameters, offset, n_outputs, width)
    head_b, offset = take_matrix(parameters, offset, 1, n_outputs)
    linear(head_w, head_b[0], h, y)
    for k in range(n_hypotheses):
        for j in range(n_joints):
            index = 2 * (k * n_joints + j)
            circle = math.atan2(y[index + 1], y[index])
            out[k, j] = joint_map[0, j] + joint_map[1, j] * circle


@numba.njit(cache=True)
def forward_batch(positions, rotations, weights, out):
    """positions (B, 3), rotations (B, 3, 3) -> out (B, K, n) rad."""
    for b in range(positions.shape[0]):
        forward_pose(positions[b], rotations[b], weights, out[b])


def trunk_parameters(model: IKNetwork) -> list[torch.Tensor]:
    """The trunk's tensors in embed_pose's order: normalization, stem, blocks, final norm."""
    per_block = [
        [block.norm.weight, block.norm.bias, block.fc1.weight, block.fc1.bias,
         block.fc2.weight, block.fc2.bias]
        for block in model.blocks
    ]  # fmt: skip
    return [
        model.input_mean, model.input_std, model.stem.weight, model.stem.bias,
        *(tensor for block in per_block for tensor in block), model.norm.weight, model.norm.bias,
    ]  # fmt: skip


def values(tensor: torch.Tensor, dtype: type) -> np.ndarray:
    """A parameter of any dtype or device as a flat numpy array of dtype."""
    return tensor.detach().cpu().double().numpy().astype(dtype).ravel()


def compiles(model: torch.nn.Module) -> bool:
    """Whether CompiledNetwork takes model: a MultiHypothesisIKNet."""
    from iknet_core.networks import MultiHypothesisIKNet

    return isinstance(model, MultiHypothesisIKNet)


class CompiledNetwork:
    """A MultiHypothesisIKNet as numba arrays: (B, 3), (B, 3, 3) -> (B, K, n) rad."""

    def __init__(self, model: MultiHypothesisIKNet) -> None:
        if not compiles(model):
            raise ValueError(f'only MultiHypothesisIKNet compiles, got {type(model).__name__}')

        config = model.config
        self.n_hypotheses, self.n_joints = config.n_hypotheses, config.n_joints
        # forward_pose's weights in three arrays, not one per parameter: a kernel's call types
        # each argument, and a tuple of 18 cost a single query ~1.3 us. The float32 parameters
        # flattened in the order forward_pose takes them; to_angles' joint centre and scale in
        # float64, as the model uses them; the sizes.
        parameters = [*trunk_parameters(model), model.head.weight, model.head.bias]
        self.weights = (
            np.concatenate([values(tensor, np.float32) for tensor in parameters]),
            np.stack([values(model.joint_center, np.float64),
                      values(model.joint_scale, np.float64)]),
            np.array(
                [model.input_mean.numel(), config.width, len(model.blocks),
                 config.n_hypotheses, config.n_joints],
                dtype=np.int64,
            ),
        )  # fmt: skip
        self(np.zeros((1, 3)), np.eye(3)[None])  # compile (or load from cache) now

    def __call__(self, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        out = np.empty((len(positions), self.n_hypotheses, self.n_joints))
        forward_batch(positions, rotations, self.weights, out)
        return out

    def forward_pose(self, position: np.ndarray, rotation: np.ndarray, out: np.ndarray) -> None:
        """One checked pose (3,), (3, 3) float64 -> out (K, n) rad, in place."""
        forward_pose(position, rotation, self.weights, out)
