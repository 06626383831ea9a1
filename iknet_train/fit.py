"""The short training loop of the studies (tracking_study, flow_study): shuffled mini-batches
under pytorch-pfn-extras with a one-cycle schedule, no validation or early stopping (train.py's
loop is for the models iknet ships)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytorch_pfn_extras as ppe
import torch
from pytorch_pfn_extras.training import extensions
from torch import nn

from iknet_train.schedules import adam, one_cycle


def fit(
    model: nn.Module,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    count: int,
    epochs: int,
    lr: float,
    out_dir: Path,
    batch_size: int = 1024,
) -> None:
    """Train model on count samples for epochs; batch_loss(indices (b,)) -> the loss of those
    samples (a scalar). Adam at a one-cycle rate peaking at lr. out_dir: the study's folder, which
    pytorch-pfn-extras makes (by default it made ./result wherever the study ran)."""
    optimizer = adam(model.parameters(), lr)
    iters_per_epoch = max(1, count // batch_size)
    scheduler = one_cycle(optimizer, lr, epochs * iters_per_epoch)
    manager = ppe.training.ExtensionsManager(
        model, optimizer, epochs, iters_per_epoch=iters_per_epoch, out_dir=str(out_dir),
        extensions=[extensions.LRScheduler(scheduler, trigger=(1, 'iteration'))],
    )  # fmt: skip
    model.train()
    while not manager.stop_trigger:
        order = torch.randperm(count)
        for index in range(iters_per_epoch):
            with manager.run_iteration():
                loss = batch_loss(order[index * batch_size : (index + 1) * batch_size])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                ppe.reporting.report({'train/loss': loss.item()})
