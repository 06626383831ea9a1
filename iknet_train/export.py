"""`iknet-export` / `ros2 run iknet export`: the network as ONNX, checked against torch.

The graph maps poses (B, 7) to the K joint hypotheses (B, K, n) rad (`iknet_core.onnx_graph`);
the solver stack ranks them by FK error, as it does for every network backend.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from iknet_core.checkpoint import load_checkpoint, partial_path
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain
from iknet_core.metrics import joint_differences
from iknet_core.onnx_graph import ExportedNetwork, stamp_source, write_onnx
from iknet_core.output_paths import output_file
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.cli import HelpFormatter, add_model_argument
from iknet_train.synthetic import synthetic_samples

# The opsets write_onnx's TorchScript exporter writes: from its base (its legacy 7 and 8 write a
# Where this graph needs, which onnxruntime refuses below 9) to its highest (torch warns that
# newer ones need its dynamo exporter). torch names the range only in a private module, so a
# torch without it gets the range torch 2.0 had.
_ONNX_CONSTANTS = getattr(torch.onnx, '_constants', None)
OPSETS = range(
    getattr(_ONNX_CONSTANTS, 'ONNX_BASE_OPSET', 9),
    getattr(_ONNX_CONSTANTS, 'ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET', 17) + 1,
)


# The export passes its check when no more than CHECK_SHARE of its hypotheses differ from the
# float32 network's in torch by more than CHECK_TOLERANCE (per unit): fp16 moves a trained
# network's by a few mrad, except where atan2 of a (cos, sin) output near zero leaves an angle
# ill-defined (the shipped seed model in fp16: 15 of 40,000 hypotheses beyond 0.01 rad, one by
# 2.4 rad).
CHECK_TOLERANCE = {'rad': 0.05, 'm': 0.005}
CHECK_SHARE = 1e-3


def opset_version(text: str) -> int:
    """argparse type of --opset: refused at the start, not as an exporter traceback."""
    value = int(text)
    if value not in OPSETS:
        raise argparse.ArgumentTypeError(
            f'{value} is not an opset torch {torch.__version__} exports this network to: give '
            f'{OPSETS.start} to {OPSETS.stop - 1}'
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-export',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    add_model_argument(parser, solvers=False)
    parser.add_argument(
        '--output',
        type=output_file,
        default=None,
        help='ONNX file (default: beside the model, MODEL.onnx or MODEL.fp16.onnx, where the '
        "onnxruntime backend serves MODEL.onnx; the shipped model's: here)",
    )
    parser.add_argument('--fp16', action='store_true', help='network weights in half precision')
    parser.add_argument(
        '--opset',
        type=opset_version,
        default=17,
        help=f'ONNX opset version, {OPSETS.start} to {OPSETS.stop - 1}',
    )
    parser.add_argument(
        '--check-samples', type=int, default=1000, help='random poses compared with torch'
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the check poses')
    return parser


@exits_on_interrupt('iknet-export', 'the file that was there is left as it was')
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        output, differences, beyond = export(
            args.model, args.output, args.fp16, args.opset, args.check_samples, args.seed
        )
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
        return failed('iknet-export', error)
    largest = ', '.join(f'{value:.3g} {unit}' for unit, value in differences.items())
    tolerance = ' / '.join(f'{CHECK_TOLERANCE[unit]:g} {unit}' for unit in differences)
    reference = 'the float32 network in torch' if args.fp16 else 'torch'
    figures = (
        f'onnxruntime vs {reference} on {args.check_samples} poses: max joint difference '
        f'{largest}; '
        f'{beyond:.3%} of the hypotheses differ by more than {tolerance}'
    )
    if beyond > CHECK_SHARE:
        print(
            f'iknet-export: error: {output} does not agree with {reference}: {figures} (allowed: '
            f'{CHECK_SHARE:.1%}); the file is kept for inspection',
            file=sys.stderr,
        )
        return 1
    print(f'wrote {output}; {figures}')
    return 0


def export(
    model_path: Path | None,
    output: Path | None,
    fp16: bool = False,
    opset: int = 17,
    check_samples: int = 1000,
    seed: int = 0,
) -> tuple[Path, dict[str, float]]:
    """Writes the ONNX file, stamped with the checkpoint it comes from where it passes the
    check (CHECK_SHARE); returns it, the max |onnxruntime - torch| difference per unit of the
    chain's joints ('rad', and 'm' where it has prismatic ones), and the share of hypotheses
    that differ by more than CHECK_TOLERANCE. torch runs the network in float32, fp16 or not:
    the check measures what the exported graph costs the network."""
    if check_samples < 1:
        raise ValueError(
            f'--check-samples must be at least 1 (every export is checked), got {check_samples}'
        )
    if output is None:
        # Beside a user's model, where the onnxruntime backend looks; here for the shipped
        # one, whose folder may be read-only.
        suffix = '.fp16.onnx' if fp16 else '.onnx'
        given = Path(model_path) if model_path else None
        output = given.with_suffix(suffix) if given else Path(DEFAULT_MODEL.stem + suffix)
    model_path = model_path or shipped(DEFAULT_MODEL)
    checkpoint = load_checkpoint(model_path)  # first: an ONNX file given as --model is named so
    if output.exists() and output.resolve() == Path(model_path).resolve():
        raise ValueError(f'--output {output} is the model file itself; name another file')
    poses, _ = synthetic_samples(checkpoint.chain, check_samples, seed)
    poses = torch.as_tensor(poses, dtype=torch.float32)
    with torch.inference_mode():  # before fp16 halves the network in place
        expected = ExportedNetwork(checkpoint.model).eval()(poses).numpy()
    wrapper = ExportedNetwork(checkpoint.model, fp16).eval()
    output.parent.mkdir(parents=True, exist_ok=True)
    # Written and checked beside the output, then renamed: an export stopped part-way leaves
    # the file that was there, not an unchecked one under its name.
    partial = partial_path(output)
    try:
        write_onnx(wrapper, checkpoint.chain, partial, opset)
        differences, beyond = compare_with_torch(partial, expected, poses, checkpoint.chain)
        if beyond <= CHECK_SHARE:  # only a graph that passed is served for the checkpoint
            stamp_source(partial, model_path)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return output, differences, beyond


def compare_with_torch(
    path: Path, torch_hypotheses: np.ndarray, poses: torch.Tensor, chain: Chain
) -> tuple[dict[str, float], float]:
    """Max |onnxruntime - torch| of the hypotheses over poses (B, 7), torch's given, per unit
    of the joints (rad, wrapped; m), and the share of hypotheses with a joint beyond
    CHECK_TOLERANCE."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    (onnx_hypotheses,) = session.run(None, {'poses': poses.numpy()})
    difference = np.abs(joint_differences(chain, onnx_hypotheses, torch_hypotheses))
    units = np.array([joint.unit for joint in chain.joints])
    tolerance = np.array([CHECK_TOLERANCE[unit] for unit in units])
    largest = {
        unit: float(difference[..., units == unit].max())
        for unit in ('rad', 'm')
        if (units == unit).any()
    }
    return largest, float((difference > tolerance).any(-1).mean())


if __name__ == '__main__':
    sys.exit(main())
