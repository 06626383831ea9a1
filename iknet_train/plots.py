"""Figures of the test report (error distribution, where in the workspace, the worst cases),
and save_figure, which every report's figures are written with."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import joint_frames


def save_figure(figure: plt.Figure, path: Path, dpi: int = 100) -> None:
    """Lay out, write and close a report's figure: closing frees it, which a long benchmark
    or study run that writes several would otherwise keep."""
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)


def plot_error_histogram(path: Path, position_error_m: np.ndarray) -> None:
    """Histogram of the position error (mm, log bins) with median and p95 marked."""
    error_mm = np.maximum(np.asarray(position_error_m) * 1000.0, 1e-4)
    figure, axes = plt.subplots(figsize=(7, 4))
    bins = np.logspace(np.log10(error_mm.min()), np.log10(error_mm.max() * 1.01), 60)
    axes.hist(error_mm, bins=bins, color='tab:blue')
    for label, value, color in (
        ('median', np.median(error_mm), 'tab:green'),
        ('p95', np.percentile(error_mm, 95), 'tab:orange'),
    ):
        axes.axvline(value, color=color, label=f'{label} {value:.2f} mm')
    axes.set(xscale='log', xlabel='position error (mm)', ylabel='samples')
    axes.set_title('End-effector position error, FK(prediction) vs recorded pose')
    axes.legend()
    save_figure(figure, path)


def plot_workspace_error(path: Path, poses: np.ndarray, position_error_m: np.ndarray) -> None:
    """Target positions coloured by error: top view (x, y) and side view (radius, z)."""
    error_mm = np.maximum(np.asarray(position_error_m) * 1000.0, 1e-3)
    order = np.argsort(error_mm)  # worst drawn last, on top
    x, y, z = poses[order, 0], poses[order, 1], poses[order, 2]
    norm = LogNorm(vmin=max(error_mm.min(), 1e-2), vmax=max(error_mm.max(), 1e-1))
    figure, (top, side) = plt.subplots(1, 2, figsize=(11, 4.5))
    top.scatter(x, y, c=error_mm[order], s=3, cmap='viridis', norm=norm)
    top.set(xlabel='x (m)', ylabel='y (m)', title='top view', aspect='equal')
    points = side.scatter(np.hypot(x, y), z, c=error_mm[order], s=3, cmap='viridis', norm=norm)
    side.set(
        xlabel='distance from the z axis (m)', ylabel='z (m)', title='side view', aspect='equal'
    )
    figure.colorbar(points, ax=[top, side], label='position error (mm)')
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_worst_cases(
    path: Path,
    chain: Chain,
    poses: np.ndarray,
    joints: np.ndarray,
    predicted: np.ndarray,
    position_error_m: np.ndarray,
    count: int = 6,
) -> None:
    """Arm drawn in the recorded arm's vertical plane for the worst samples.

    Horizontal axis: distance along the recorded joint1 direction (m), so a wrong joint1 shows as
    a foreshortened predicted arm.
    """
    worst: list[int] = []
    for index in np.argsort(position_error_m)[::-1]:
        # Neighbouring rows of a recording are near copies: show distinct moments.
        if all(abs(index - chosen) > 100 for chosen in worst):
            worst.append(int(index))
        if len(worst) == count:
            break
    columns = 3
    rows = int(np.ceil(len(worst) / columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.6 * rows), squeeze=False)
    for axis in axes.ravel()[len(worst) :]:
        axis.set_visible(False)
    for axis, index in zip(axes.ravel(), worst, strict=False):
        direction = np.array([np.cos(joints[index, 0]), np.sin(joints[index, 0])])
        arms = (('recorded', joints[index], 'o-'), ('predicted', predicted[index], 's--'))
        for label, q, style in arms:
            _, origins, tip, _ = joint_frames(chain, q[None])
            points = np.concatenate([np.stack(origins, 1)[0], tip], 0)
            axis.plot(points[:, :2] @ direction, points[:, 2], style, label=label)
        target = poses[index]
        axis.plot(target[:2] @ direction, target[2], 'k*', markersize=12, label='target')
        axis.set_title(f'sample {index}: {position_error_m[index] * 1000:.1f} mm', fontsize=9)
        axis.set(aspect='equal', xlabel='horizontal (m)', ylabel='z (m)')
    axes.ravel()[0].legend(fontsize=8)
    figure.suptitle('Worst cases, in the recorded arm plane')
    save_figure(figure, path)
