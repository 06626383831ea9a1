"""`iknet-export` / `ros2 run iknet export`: the network as ONNX, checked against torch.

The graph maps poses (B, 7) to the K joint hypotheses (B, K, n) rad; the caller ranks them by FK
error (`iknet_core.predict.rank_hypotheses`). FK stays out of the graph: the shared kinematics
builds its start frame with numpy, which a trace would freeze to the example batch size.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from iknet_core.checkpoint import load_checkpoint
from iknet_core.metrics import wrapped_difference
from iknet_core.networks import IKNetwork
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.cli import add_model_argument
from iknet_train.synthetic import synthetic_samples

INPUT_NAMES = ['poses']
OUTPUT_NAMES = ['hypotheses']


class ExportedNetwork(nn.Module):
    """poses (B, 7) float32 -> hypotheses (B, K, n) float32 rad.

    With fp16 only the trunk runs in half precision: features such as R[2, 1] (0 up to
    rounding on the OM-X) must be normalized in float32, where their rounding noise is tiny.
    """

    def __init__(self, model: IKNetwork, fp16: bool = False) -> None:
        super().__init__()
        self.model = model
        self.fp16 = fp16
        if fp16:
            model.half()
            model.input_mean, model.input_std = model.input_mean.float(), model.input_std.float()

    def forward(self, poses: torch.Tensor) -> torch.Tensor:
        features = self.model.normalized_features(poses)
        if self.fp16:
            return self.model.to_angles(self.model.trunk(features.half()).float())
        return self.model.to_angles(self.model.trunk(features))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-export',
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_model_argument(parser)
    parser.add_argument(
        '--output',
        type=Path,
        default=None,
        help='ONNX file (default: the model name with .onnx, or .fp16.onnx, here)',
    )
    parser.add_argument('--fp16', action='store_true', help='network weights in half precision')
    parser.add_argument('--opset', type=int, default=17, help='ONNX opset version')
    parser.add_argument(
        '--check-samples', type=int, default=1000, help='random poses compared with torch'
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the check poses')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        output, difference = export(
            args.model, args.output, args.fp16, args.opset, args.check_samples, args.seed
        )
    except (ValueError, FileNotFoundError) as error:
        print(f'iknet-export: error: {error}', file=sys.stderr)
        return 1
    print(
        f'wrote {output}; onnxruntime vs torch on {args.check_samples} poses: max joint '
        f'difference {difference:.3g} rad'
    )
    return 0


def export(
    model_path: Path | None,
    output: Path | None,
    fp16: bool = False,
    opset: int = 17,
    check_samples: int = 1000,
    seed: int = 0,
) -> tuple[Path, float]:
    """Writes the ONNX file; returns it and the max |onnxruntime - torch| difference (rad)."""
    model_path = model_path or shipped(DEFAULT_MODEL)
    output = output or Path(model_path.stem + ('.fp16.onnx' if fp16 else '.onnx'))
    checkpoint = load_checkpoint(model_path)
    wrapper = ExportedNetwork(checkpoint.model, fp16).eval()
    poses, _ = synthetic_samples(checkpoint.chain, max(check_samples, 2), seed)
    poses = torch.as_tensor(poses, dtype=torch.float32)
    output.parent.mkdir(parents=True, exist_ok=True)
    # The TorchScript-based exporter: no onnxscript dependency, dynamic batch by dynamic_axes.
    with warnings.catch_warnings():
        # The legacy exporter is deprecated and traces the shape check; neither matters here.
        warnings.simplefilter('ignore', DeprecationWarning)
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        torch.onnx.export(
            wrapper,
            (poses[:2],),
            str(output),
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
            dynamic_axes={name: {0: 'batch'} for name in INPUT_NAMES + OUTPUT_NAMES},
            opset_version=opset,
            dynamo=False,
        )
    return output, compare_with_torch(output, wrapper, poses)


def compare_with_torch(path: Path, wrapper: nn.Module, poses: torch.Tensor) -> float:
    """Max |onnxruntime - torch| of the hypotheses (rad, wrapped) over poses (B, 7)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    (onnx_hypotheses,) = session.run(None, {'poses': poses.numpy()})
    with torch.inference_mode():
        torch_hypotheses = wrapper(poses).numpy()
    difference = wrapped_difference(onnx_hypotheses.astype(np.float64), torch_hypotheses)
    return float(np.abs(difference).max())


if __name__ == '__main__':
    sys.exit(main())
