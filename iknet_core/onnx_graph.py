"""The network as an ONNX graph, poses (B, 7) -> K joint hypotheses (B, K, n) rad, for
onnxruntime (the server's deployment-parity backend) and `iknet-export`.

FK and ranking stay out of the graph: the solver stack ranks the hypotheses, whatever ran them.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.networks import IKNetwork, MixtureIKNet

INPUT_NAMES = ['poses']
OUTPUT_NAMES = ['hypotheses']
# The graph's metadata key for the SHA-256 of the checkpoint it was exported from: a graph
# beside a checkpoint is served for it only when this matches (a file date proves nothing).
SOURCE_KEY = 'iknet_checkpoint_sha256'


class ExportedNetwork(nn.Module):
    """poses (B, 7) float32 -> hypotheses (B, K, n) float32 rad.

    With fp16 only the trunk runs in half precision: features such as R[2, 1] (0 up to
    rounding on the OM-X) must be normalized in float32, where their rounding noise is tiny.
    """

    def __init__(self, model: IKNetwork, fp16: bool = False) -> None:
        super().__init__()
        if isinstance(model, MixtureIKNet):
            raise ValueError('a mixture model samples in torch; only K-head networks export')
        self.model = model
        self.fp16 = fp16
        if fp16:
            model.half()
            for name in model.float32_buffers:
                setattr(model, name, getattr(model, name).float())

    def forward(self, poses: torch.Tensor) -> torch.Tensor:
        features = self.model.normalized_features(poses)
        if self.fp16:
            return self.model.to_angles(self.model.trunk(features.half()).float())
        return self.model.to_angles(self.model.trunk(features))


def write_onnx(
    wrapper: ExportedNetwork, chain: Chain, target: Path | io.BytesIO, opset: int = 17
) -> None:
    """Trace the wrapped network into target (a file or a buffer), batch dimension dynamic."""
    example = torch.as_tensor(pose_from_joints(chain, np.zeros((2, chain.n_joints))))
    # The TorchScript-based exporter: no onnxscript dependency, dynamic batch by dynamic_axes.
    with warnings.catch_warnings():
        # The legacy exporter is deprecated and traces the shape check; neither matters here.
        warnings.simplefilter('ignore', DeprecationWarning)
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        torch.onnx.export(
            wrapper.eval(),
            (example.float(),),
            target if isinstance(target, io.BytesIO) else str(target),
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
            dynamic_axes={name: {0: 'batch'} for name in INPUT_NAMES + OUTPUT_NAMES},
            opset_version=opset,
            dynamo=False,
        )


def onnx_bytes(model: IKNetwork, chain: Chain) -> bytes:
    """The float32 graph in memory, for an onnxruntime session without a file."""
    buffer = io.BytesIO()
    write_onnx(ExportedNetwork(model), chain, buffer)
    return buffer.getvalue()


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def stamp_source(graph: Path, checkpoint: Path) -> None:
    """Record in the graph file which checkpoint it is (SOURCE_KEY)."""
    import onnx

    model = onnx.load(str(graph))
    onnx.helper.set_model_props(model, {SOURCE_KEY: file_digest(checkpoint)})
    onnx.save(model, str(graph))


def exported_from(graph: Path, checkpoint: Path) -> bool:
    """Whether graph is a readable ONNX file stamped as exported from checkpoint as it is now."""
    import onnx

    try:
        model = onnx.load(str(graph))
    except Exception:  # any unreadable file is simply not the export
        return False
    stamps = {prop.key: prop.value for prop in model.metadata_props}
    return stamps.get(SOURCE_KEY) == file_digest(checkpoint)
