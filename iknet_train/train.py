"""`iknet-train` / `ros2 run iknet train`: fit an IK network to recorded and synthetic samples.

Keeps the reference IKNet's flags; pytorch-pfn-extras runs the loop (early stopping on the
validation loss, log, progress, loss plot, snapshots for --resume).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import random
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytorch_pfn_extras as ppe
import torch
from pytorch_pfn_extras.training import extensions, triggers

from iknet_core.checkpoint import (
    FORMAT,
    Checkpoint,
    load_checkpoint,
    partial_path,
    save_checkpoint,
)
from iknet_core.device import DEVICES, resolve_device
from iknet_core.entry import failed
from iknet_core.interrupts import signals_as_interrupt, signals_held
from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.networks import (
    DEFAULT_MODEL_TYPE,
    MODELS,
    IKNetwork,
    MixtureIKNet,
    MultiHypothesisIKNet,
    build_model,
    joint_arcs,
    joint_ranges,
    model_class_of,
)
from iknet_core.output_paths import output_dir, output_file
from iknet_core.resources import TRAIN_DATA
from iknet_core.solvers.policy import joint_bounds
from iknet_train.cli import (
    HelpFormatter,
    add_chain_arguments,
    add_recording_arguments,
    chain_from_args,
    chain_from_recordings,
    reads_recordings,
    recordings_from_args,
)
from iknet_train.data import (
    Recording,
    drop_repeats,
    time_block_split,
)
from iknet_train.losses import LOSSES, mixture_loss
from iknet_train.run_record import (
    carry_on_advice,
    check_resumed_run,
    keep_unfinished_snapshot,
    out_folder_held,
    read_run_record,
    record_path,
    run_record,
    write_run_record,
)
from iknet_train.schedules import adam, adopt_kernels, one_cycle
from iknet_train.synthetic import parse_ranges, synthetic_samples
from iknet_train.time_budget import TimeBudget

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainDefaults:
    """Per-model defaults of the flags left unset."""

    lr: float
    batch_size: int
    epochs: int
    patience: int
    check_epochs: int
    schedule: str


TRAIN_DEFAULTS = {
    # Ours: one-cycle schedule; the default run takes about 4 minutes on 2 CPU cores. A peak lr of
    # 1e-2 reaches the same accuracy but with loss spikes that can stop the run early.
    'iknet': TrainDefaults(
        lr=5e-3, batch_size=2048, epochs=50, patience=10, check_epochs=1, schedule='onecycle'
    ),
    # As the reference IKNet trains: Adam lr 0.01, batch 10000, early stop checked every 3 epochs.
    'reference': TrainDefaults(
        lr=0.01, batch_size=10000, epochs=100, patience=3, check_epochs=3, schedule='constant'
    ),
    'mixture': TrainDefaults(
        lr=2e-3, batch_size=1024, epochs=50, patience=10, check_epochs=1, schedule='onecycle'
    ),
}
AMP_MODES = ('off', 'bf16', 'fp16')
AMP_DTYPES = {'bf16': torch.bfloat16, 'fp16': torch.float16}
# What a run writes into --out, each epoch.
SNAPSHOT_FILE, LOG_FILE, LOSS_PLOT_FILE = 'snapshot', 'log', 'loss.png'
RUN_FILES = (SNAPSHOT_FILE, LOG_FILE, LOSS_PLOT_FILE)
# --init-from: a short schedule in small batches, as a fine-tune often has only ~1,000 samples.
# Peak lr 3e-4: at 1e-3 an OM-X fine-tune on 10,000 samples ended worse than on 1,000 (1.5 mm
# against 0.6 mm median), the base's solution shaken loose; at 3e-4 more samples help (0.4 mm).
FINE_TUNE_DEFAULTS = TrainDefaults(
    lr=3e-4, batch_size=256, epochs=100, patience=10, check_epochs=1, schedule='onecycle'
)
DEFAULT_SYNTHETIC = 400_000


def covered_ranges(chain: Chain, joints: np.ndarray) -> tuple[list[float], list[float]]:
    """Each joint's reach (rad, m), widened to the training joints (B, n) where they go beyond it:
    where a model's outputs must be able to go."""
    low, high = joint_bounds(chain, 'reach')
    if len(joints):
        low, high = np.minimum(low, joints.min(0)), np.maximum(high, joints.max(0))
    return low.tolist(), high.tolist()


def output_arcs(chain: Chain, joints: np.ndarray) -> dict[str, list[float]]:
    """The iknet model's output arcs: covered_ranges, so every hypothesis stays where the arm
    can be."""
    return joint_arcs(*covered_ranges(chain, joints))


def per_model(name: str) -> str:
    """' (default: iknet X, reference Y)' for a flag whose default depends on --model."""
    values = ', '.join(f'{model} {getattr(d, name)}' for model, d in TRAIN_DEFAULTS.items())
    return f' (default: {values})'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-train', description=__doc__, formatter_class=HelpFormatter
    )
    add_chain_arguments(parser)
    data = parser.add_argument_group('data (default: the shipped recordings for the OM-X)')
    add_recording_arguments(data, TRAIN_DATA, allow_none=True)
    data.add_argument(
        '--synthetic',
        type=int,
        default=DEFAULT_SYNTHETIC,
        help='synthetic (FK) samples to add; they cover the whole workspace',
    )
    data.add_argument(
        '--synthetic-ranges',
        default='',
        help="joint ranges of synthetic samples, e.g. 'joint1=-3.1:3.1,joint2=-1.5:1.5' (rad; m "
        "for a prismatic joint); joints left out keep the default ranges (each joint's reach; "
        'for the OM-X, its hand-guided ranges, but the reach for a mixture model (--model mixture '
        "or --init-from one), which samples every solution), or those of a first 'reach' or "
        "'limits' ('reach,joint2=-1:1')",
    )
    data.add_argument(
        '--train-val-ratio', type=float, default=0.8, help='share of samples used for training'
    )
    data.add_argument(
        '--val-block-s',
        type=float,
        default=10.0,
        help='recordings go to train or validation in whole blocks of this many seconds',
    )
    fit = parser.add_argument_group('model and optimisation')
    fit.add_argument(
        '--model',
        choices=sorted(MODELS),
        default=None,
        help=f"architecture (default: {DEFAULT_MODEL_TYPE}; with --init-from, the model's own)",
    )
    fit.add_argument(
        '--model-config',
        default='{}',
        help='JSON overrides of the model config, e.g. \'{"width": 128}\'',
    )
    fit.add_argument(
        '--init-from',
        type=Path,
        default=None,
        help="fine-tune: start from this checkpoint's weights, architecture and input "
        'normalization, on the chain the flags or data name (default: its own); unset flags '
        f'take the fine-tune defaults {asdict(FINE_TUNE_DEFAULTS)}',
    )
    fit.add_argument('--epochs', type=int, default=None, help='most epochs' + per_model('epochs'))
    fit.add_argument(
        '--batch-size', type=int, default=None, help='batch size' + per_model('batch_size')
    )
    fit.add_argument(
        '--lr', type=float, default=None, help='(peak) Adam learning rate' + per_model('lr')
    )
    fit.add_argument(
        '--schedule',
        choices=('onecycle', 'constant'),
        default=None,
        help='learning-rate schedule' + per_model('schedule'),
    )
    fit.add_argument(
        '--patience',
        type=int,
        default=None,
        help='early stop after this many checks without a better validation loss'
        + per_model('patience'),
    )
    fit.add_argument(
        '--max-time',
        type=float,
        default=None,
        metavar='MINUTES',
        help='end the run, data preparation included, within about this many minutes: the '
        "first epoch's timed iterations set how many epochs (at most --epochs) fit, and the "
        'schedule anneals over those',
    )
    fit.add_argument(
        '--sample-fk-weight',
        type=float,
        default=0.0,
        metavar='W',
        help="a mixture model's loss adds W times the FK error of its own samples (position "
        'over 0.1 m plus orientation), in training and in the validation loss that picks the '
        'model kept: it trains the sampler as it runs, against the far-off samples; a step '
        "then costs about 2.7 times as much on one CPU thread. 10 took the Panda's mean "
        'raw-sample error 19 %% lower than the likelihood alone in the same time (README)',
    )
    fit.add_argument('--seed', type=int, default=0, help='seeds torch, numpy and Python')
    fit.add_argument('--device', choices=DEVICES, default='auto', help='where to train')
    fit.add_argument(
        '--amp',
        choices=AMP_MODES,
        default='off',
        help="mixed precision for the network's forward pass (fp16: CUDA only; bf16: CUDA or "
        'CPU); the FK loss stays float32. Off by default: bf16 measured slower on an H200 (a '
        'GPU step of these small networks is bound by kernel launches)',
    )
    out = parser.add_argument_group('output')
    out.add_argument(
        '--save-model', type=output_file, default='iknet.pt', help='checkpoint file to write'
    )
    out.add_argument(
        '--out',
        type=output_dir,
        default='iknet_train_result',
        help='directory for the log, loss.png and snapshots',
    )
    out.add_argument('--resume', type=Path, default=None, help='snapshot file to resume from')
    out.add_argument(
        '--no-progress', action='store_true', help='no progress bar (for logs and CI)'
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    started = time.time()
    with signals_as_interrupt() as stopped_by:
        # The first is a stand-in for Python's own SIGINT; more: a signal came.
        signalled = lambda: len(stopped_by) > 1  # noqa: E731
        try:
            train(args, command=shlex.join(['iknet-train', *argv]), signalled=signalled)
        except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
            return failed('iknet-train', error)
        except KeyboardInterrupt:
            print(f'iknet-train: {interrupted(args, started, argv)}', file=sys.stderr)
            return 128 + stopped_by[-1]
    return 0


def interrupted(
    args: argparse.Namespace, started: float, argv: Sequence[str] | None = None
) -> str:
    """What an interrupted run leaves and how to carry it on: the snapshot of its last whole
    epoch, if it wrote one (an older run's in the same --out is not its own, nor one that
    another run wrote while this one had not yet taken the folder: args.out_held); given its
    argv, the whole command that does."""
    held = getattr(args, 'out_held', False)
    # Files cut off mid-write: ppe's (it writes tmp_NAME, then renames it) and the model's.
    partials = [args.out / f'tmp_{name}' for name in RUN_FILES]
    own = (args.save_model, record_path(args.out / SNAPSHOT_FILE))
    for partial in [*partials, *map(partial_path, own)] if held else []:
        partial.unlink(missing_ok=True)
    snapshot = args.out / SNAPSHOT_FILE
    if not (held and snapshot.is_file() and snapshot.stat().st_mtime >= started):
        snapshot = args.resume  # no epoch ended: the snapshot it resumed still carries it on
    if snapshot is None:
        return f'interrupted before its first epoch ended; nothing was saved to {args.save_model}'
    flags = 'the same flags'
    if args.max_time is not None:  # --resume takes a run's length, not a time to fit one to
        flags = (
            'the same flags, --epochs N instead of --max-time (N as logged above: "N of at most '
            'M epochs fit")'
        )
    command = ''
    if argv is not None and args.max_time is None:
        # Its own flags, the --resume it was given (if any) left out: the last given counts.
        words = list(argv)
        for index in reversed(range(len(words))):
            if words[index] == '--resume' and index + 1 < len(words):
                del words[index : index + 2]
            elif words[index].startswith('--resume='):
                del words[index]
        command = f': {shlex.join(["iknet-train", *words, "--resume", str(snapshot)])}'
    return (
        f'interrupted; nothing was saved to {args.save_model}. The snapshot of the last whole '
        f'epoch is {snapshot}: carry the run on with {flags} and --resume {snapshot}{command}'
    )


def written_over(args: argparse.Namespace) -> list[str]:
    """What of an earlier run this one writes over, said as it starts (a Ctrl-C then keeps it):
    a model at --save-model, and a run's log and plot in --out (a stopped run's snapshot is
    kept aside instead). A resumed run carries its own on: nothing is said."""
    if args.resume is not None:
        return []
    said = []
    if args.save_model.is_file():
        written = time.strftime('%Y-%m-%d %H:%M', time.localtime(args.save_model.stat().st_mtime))
        said.append(
            f'--save-model {args.save_model} exists (written {written}): this run writes over '
            'it when it ends; give another --save-model to keep it'
        )
    files = [name for name in (LOG_FILE, LOSS_PLOT_FILE) if (args.out / name).is_file()]
    if files:
        said.append(
            f"--out {args.out} holds an earlier run's {' and '.join(files)}: this run writes "
            'over them; give another --out to keep them'
        )
    return said


def overridden_flags(
    own_argv: Sequence[str], extra_argv: Sequence[str], names: Sequence[str]
) -> tuple[list[str], argparse.Namespace]:
    """For tools that run iknet-train with flags of their own (own_argv) and pass a user's on
    (extra_argv, after them): the flags among names (argparse's dests) that extra_argv sets to
    something else, as '--flag', and the namespace of both. argparse resolves the flags, so an
    abbreviation is caught too."""
    own = build_parser().parse_args(own_argv)
    given = build_parser().parse_args([*own_argv, *extra_argv])
    changed = [
        f'--{name.replace("_", "-")}'
        for name in names
        if getattr(given, name) != getattr(own, name)
    ]
    return changed, given


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flag values that cannot train, naming the flag, before any data is loaded."""
    for flag in ('epochs', 'batch_size', 'patience'):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ValueError(f'--{flag.replace("_", "-")} must be at least 1, got {value}')
    if args.lr is not None and not args.lr > 0.0:
        raise ValueError(f'--lr must be > 0, got {args.lr}')
    if args.synthetic < 0:
        raise ValueError(f'--synthetic must be >= 0, got {args.synthetic}')
    if not 0.0 < args.val_block_s < math.inf:
        raise ValueError(f'--val-block-s must be a number of seconds > 0, got {args.val_block_s}')
    if not 0.0 < args.train_val_ratio < 1.0:
        raise ValueError(f'--train-val-ratio must be between 0 and 1, got {args.train_val_ratio}')
    if not 0.0 <= args.sample_fk_weight < math.inf:
        raise ValueError(
            f'--sample-fk-weight must be a finite number >= 0, got {args.sample_fk_weight}'
        )
    if args.max_time is not None and not 0.0 < args.max_time < math.inf:
        raise ValueError(f'--max-time must be a number of minutes > 0, got {args.max_time}')
    if args.max_time is not None and args.resume is not None:
        raise ValueError(
            '--max-time fits the length of a run to its time, --resume carries on a run of '
            'the length its flags make: resume with --epochs N and no --max-time, N the epochs '
            'the run planned (its log: "N of at most M epochs fit"), or, for a run that ended, '
            'start a new one with --init-from the checkpoint it saved'
        )
    if args.resume is not None and not args.resume.is_file():
        raise FileNotFoundError(f'no snapshot at {args.resume}')
    if args.init_from is not None and args.save_model.resolve() == args.init_from.resolve():
        raise ValueError(
            f'--save-model {args.save_model} is the --init-from model: the run would write over '
            'the model it starts from; give another --save-model'
        )


def model_overrides(args: argparse.Namespace) -> dict:
    """--model-config's JSON object, or ValueError naming the flag."""
    try:
        overrides = json.loads(args.model_config)
    except json.JSONDecodeError as error:
        raise ValueError(f'--model-config is not JSON ({error}): {args.model_config!r}') from None
    if not isinstance(overrides, dict):
        raise ValueError(
            f'--model-config must be a JSON object such as \'{{"width": 128}}\', got '
            f'{args.model_config!r}'
        )
    return overrides


def load_snapshot(path: Path, device: torch.device) -> dict:
    """The snapshot --resume names, read before any data is loaded; ValueError saying what the
    file is where it is not one."""
    try:
        snapshot = torch.load(path, map_location=device, weights_only=True)
    except OSError:  # cannot be read at all: its own words say why
        raise
    except Exception as error:  # unpickling a file that is not torch's raises many kinds
        raise ValueError(
            f'--resume {path} is not a file torch can read ({type(error).__name__}); '
            'iknet-train writes a snapshot to --out/snapshot after each epoch'
        ) from None
    if isinstance(snapshot, dict) and snapshot.get('format') == FORMAT:
        raise ValueError(
            f'--resume {path} is a model checkpoint (--save-model), not a snapshot of a run: '
            f'to train further from its model, start a new run with --init-from {path}'
        )
    if not (isinstance(snapshot, dict) and '_start_iteration' in snapshot):
        raise ValueError(
            f'--resume {path} is not a snapshot of an iknet-train run (--out/snapshot)'
        )
    return snapshot


def check_resumable(args: argparse.Namespace, snapshot: dict, total_steps: int) -> None:
    """A snapshot carries on the run it came from, whose one-cycle schedule has a fixed length:
    the flags must make as many iterations (the same data, batch size and --epochs)."""
    extension = snapshot.get('extensions', {}).get('LRScheduler', {}).get('extension', {})
    planned = extension.get('scheduler', {}).get('total_steps')
    if planned is not None and planned != total_steps:
        raise ValueError(
            f'{args.resume} is a snapshot of a run of {planned} iterations; these flags make '
            f'{total_steps}: --resume carries a run on with the flags it was started with. '
            f'{carry_on_advice(read_run_record(args.resume))}'
        )


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_fine_tune(
    args: argparse.Namespace, base: Checkpoint, chain: Chain, model_config: dict
) -> None:
    """A fine-tune keeps the base's architecture: refuse flags that would change it
    (model_config: --model-config's overrides). With --resume it carries on a stopped
    fine-tune: the base gives the architecture and defaults, the snapshot the state."""
    if model_config:
        raise ValueError('--model-config cannot change the architecture of an --init-from model')
    if args.model not in (None, base.model_type):
        raise ValueError(
            f'--model {args.model}: {args.init_from} holds a model of type {base.model_type}, '
            'and a fine-tune keeps its architecture; drop --model'
        )
    if len(base.joint_names) != chain.n_joints:
        raise ValueError(
            f'{args.init_from} has {len(base.joint_names)} joints ({base.chain.name}); '
            f'{chain.name} has {chain.n_joints}: a fine-tune needs the same joint count'
        )
    if base.chain != chain:
        logger.warning(
            '--init-from %s is a model of %s, fine-tuned here for %s: its output ranges stay '
            "the base's, not this arm's reach (answers beyond the limits are refined into them; "
            'a new model fits them)',
            args.init_from, base.chain.name, chain.name,
        )  # fmt: skip


def check_inside_arcs(
    args: argparse.Namespace, base: Checkpoint, chain: Chain, joints: np.ndarray
) -> None:
    """The base model's outputs cover only its arcs (a K-head network; a joint with the whole
    circle wraps, as joint angles do) or its ranges (a mixture model's component means): data
    beyond them cannot be learned, as on another arm whose joints turn elsewhere."""
    if isinstance(base.model, MultiHypothesisIKNet):
        with torch.no_grad():
            circle = base.model.circle_angles(torch.as_tensor(joints, dtype=torch.float32))
        arcs = (base.model.joint_scale < 1.0).numpy()
        outside = ((circle.abs() > math.pi + 1e-4).any(0).numpy() & arcs).tolist()
        center, half_range = base.model.joint_center, base.model.joint_scale * math.pi
    elif isinstance(base.model, MixtureIKNet):
        center, half_range = base.model.joint_center, base.model.joint_half_range
        beyond = np.abs(joints - center.double().numpy()) > half_range.double().numpy() + 1e-4
        outside = beyond.any(0).tolist()
    else:
        return
    if any(outside):
        names = [name for name, out in zip(chain.joint_names, outside, strict=True) if out]
        centers, half_ranges = (
            np.round(v.double().numpy(), 3).tolist() for v in (center, half_range)
        )
        raise ValueError(
            f'{args.init_from} (a model of {base.chain.name}) answers only within its output '
            f'ranges (centers {centers}, half ranges {half_ranges} rad), and the data of '
            f'{chain.name} goes beyond them at {names}: train a new model instead'
        )


def recorded_data(args: argparse.Namespace, chain: Chain) -> list[Recording]:
    """Recordings from the CSV flags and --data, rest rows left out. The shipped recordings are
    the default for the OM-X only; another arm trains on synthetic data unless given some."""
    if not reads_recordings(args, chain):
        return []
    recordings = recordings_from_args(args, chain, TRAIN_DATA)
    moving = [drop_repeats(r) for r in recordings]
    total, kept = sum(map(len, recordings)), sum(map(len, moving))
    if kept < total:
        logger.info(
            'left out %d of %d recorded rows where the arm rested (joints equal to the row '
            'before): they add no information',
            total - kept, total,
        )  # fmt: skip
    return moving


def split_data(
    args: argparse.Namespace, chain: Chain, recordings: list[Recording]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], dict]:
    """(poses, joints) for training and validation, and counts for the checkpoint."""
    if recordings:
        poses = np.concatenate([r.poses for r in recordings])
        joints = np.concatenate([r.joints for r in recordings])
        train, val = time_block_split(
            recordings, args.train_val_ratio, args.val_block_s, args.seed
        )
    else:
        poses, joints = np.zeros((0, 7)), np.zeros((0, chain.n_joints))
        train = val = np.zeros(0, dtype=bool)
    ranges = parse_ranges(
        args.synthetic_ranges, chain, model_class_of(args.model).samples_solution_set
    )
    synthetic_poses, synthetic_joints = synthetic_samples(chain, args.synthetic, args.seed, ranges)
    # Synthetic samples are independent draws: a row split cannot leak.
    synthetic_train = (
        np.random.default_rng(args.seed).random(args.synthetic) < args.train_val_ratio
    )
    counts = {
        'recordings': [r.source for r in recordings],
        'recorded_train': int(train.sum()),
        'recorded_val': int(val.sum()),
        'synthetic_train': int(synthetic_train.sum()),
        'synthetic_val': int((~synthetic_train).sum()),
        'synthetic_ranges': ranges.tolist(),
    }
    train_set = (
        np.concatenate([poses[train], synthetic_poses[synthetic_train]]),
        np.concatenate([joints[train], synthetic_joints[synthetic_train]]),
    )
    val_set = (
        np.concatenate([poses[val], synthetic_poses[~synthetic_train]]),
        np.concatenate([joints[val], synthetic_joints[~synthetic_train]]),
    )
    if len(train_set[0]) == 0 or len(val_set[0]) == 0:
        raise ValueError(
            f'{len(train_set[0])} training and {len(val_set[0])} validation samples: need both; '
            'add recordings or --synthetic samples, or change --train-val-ratio (recordings '
            f'are split in blocks of --val-block-s {args.val_block_s:g} s: one shorter than a '
            'few blocks may land on one side)'
        )
    return train_set, val_set, counts


def train(
    args: argparse.Namespace,
    command: str = '',
    extra_extensions: Sequence[ppe.training.extension.Extension] = (),
    signalled: Callable[[], bool] = lambda: False,
) -> Path:
    """Runs the training described by the parsed flags; returns the checkpoint path.
    extra_extensions join the loop (iknet-tune's pruning reads the validation reports).
    signalled: whether a stop signal came, checked each iteration: its KeyboardInterrupt can
    be lost where it lands in a callback Python runs for the garbage collector ('Exception
    ignored in ... WeakKeyDictionary'), and the run trained on (1 Ctrl-C in 19). Sets
    args.out_held once the --out folder is this run's (out_folder_held)."""
    args.out_held = False
    with contextlib.ExitStack() as held:
        return _train(args, command, extra_extensions, signalled, held)


def _train(
    args: argparse.Namespace,
    command: str,
    extra_extensions: Sequence[ppe.training.extension.Extension],
    signalled: Callable[[], bool],
    held: contextlib.ExitStack,
) -> Path:
    started = time.monotonic()
    check_flags(args)
    model_config = model_overrides(args)
    seed_everything(args.seed)
    device = resolve_device(args.device)
    if args.amp == 'fp16' and device.type != 'cuda':
        raise ValueError(f'--amp fp16 needs CUDA (training on {device}); bf16 runs on the CPU too')
    snapshot = load_snapshot(args.resume, device) if args.resume is not None else None
    base = load_checkpoint(args.init_from) if args.init_from is not None else None
    chain = chain_from_args(args) or chain_from_recordings(args)
    chain = chain or (base.chain if base else OMX_CHAIN)
    if base is not None:
        check_fine_tune(args, base, chain, model_config)
        args.model = base.model_type
    args.model = args.model or DEFAULT_MODEL_TYPE
    if args.sample_fk_weight > 0.0 and args.model != 'mixture':
        raise ValueError(
            f'--sample-fk-weight trains a mixture model on its own samples; this run trains '
            f'a{"n" if args.model == "iknet" else ""} {args.model} model'
        )
    defaults = FINE_TUNE_DEFAULTS if base else TRAIN_DEFAULTS[args.model]
    settings = {
        key: value if getattr(args, key, None) is None else getattr(args, key)
        for key, value in asdict(defaults).items()
    }
    record = run_record(chain.to_dict(), args.model, model_config, settings, vars(args))
    if args.resume is not None:
        check_resumed_run(args.resume, record)
    # Another run still writing into --out would mix its snapshot, record and log with this
    # run's: refused, before the data loads. Held until this run ends.
    held.enter_context(out_folder_held(args.out))
    args.out_held = True
    for warning in written_over(args):
        logger.warning(warning)
    train_set, val_set, counts = split_data(args, chain, recorded_data(args, chain))
    logger.info(
        'training on %s', json.dumps({k: v for k, v in counts.items() if 'range' not in k})
    )

    train_poses, train_joints = (torch.as_tensor(a, dtype=torch.float32) for a in train_set)
    every_joint = np.concatenate([train_set[1], val_set[1]])  # what the outputs must cover
    if base is not None:
        check_inside_arcs(args, base, chain, every_joint)
        model = base.model  # its normalization too: the weights were fitted to it
        model.use_chain(chain)  # the arm this run trains for (a mixture model's local frames)
    else:
        config = {'n_joints': chain.n_joints, **model_config}
        if args.model == 'iknet':
            config = {**output_arcs(chain, every_joint), **config}
        elif args.model == 'mixture':
            config = {**joint_ranges(*covered_ranges(chain, every_joint)), **config}
        model = build_model(args.model, config, chain)
        model.fit_normalization(train_poses)
    model.to(device)
    train_poses, train_joints = train_poses.to(device), train_joints.to(device)
    val_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(
            *(torch.as_tensor(a, dtype=torch.float32, device=device) for a in val_set)
        ),
        batch_size=16384,
    )
    loss_fn = LOSSES[args.model]
    if args.sample_fk_weight > 0.0:
        loss_fn = functools.partial(mixture_loss, sample_fk_weight=args.sample_fk_weight)
    optimizer = adam(model.parameters(), settings['lr'])
    batch_size = settings['batch_size']
    iters_per_epoch = max(1, len(train_poses) // batch_size)
    epochs = settings['epochs']

    stop = triggers.EarlyStoppingTrigger(
        check_trigger=(settings['check_epochs'], 'epoch'),
        monitor='val/loss',
        patience=settings['patience'],
        mode='min',
        max_trigger=(epochs, 'epoch'),
    )
    best = BestModel(model)
    early = EarlyStopping(stop)
    history = RunHistory(command, started)

    @torch.no_grad()
    def validate(poses: torch.Tensor, joints: torch.Tensor) -> None:
        report('val', loss_fn(model, chain, poses, joints))

    manager = ppe.training.ExtensionsManager(
        model,
        optimizer,
        epochs,
        iters_per_epoch=iters_per_epoch,
        out_dir=str(args.out),
        # Decided by EarlyStopping as each epoch ends (a function: ppe's copy of the trigger
        # for its own use is then this one, not a second count).
        stop_trigger=lambda manager: early.fired,
        extensions=[
            extensions.Evaluator(val_loader, model, eval_func=validate),
            best,
            early,
            history,
            extensions.LogReport(trigger=(1, 'epoch'), filename=LOG_FILE),
            extensions.PrintReport(
                [
                    'epoch',
                    'iteration',
                    'train/loss',
                    'val/loss',
                    'val/position_mm',
                    'lr',
                    'elapsed_time',
                ],
                out=PlainText(sys.stdout) if args.no_progress else sys.stdout,
            ),
            extensions.PlotReport(
                ['train/loss', 'val/loss'],
                'epoch',
                filename=LOSS_PLOT_FILE,
                # A likelihood loss goes negative: no log axis for it.
                postprocess=None if args.model == 'mixture' else log_scale,
            ),
            extensions.observe_lr(optimizer),
            extensions.snapshot(filename=SNAPSHOT_FILE, n_retains=1),
        ],
    )
    schedule = None
    if settings['schedule'] == 'onecycle':
        scheduler = one_cycle(optimizer, settings['lr'], epochs * iters_per_epoch)
        schedule = extensions.LRScheduler(scheduler, trigger=(1, 'iteration'))
        manager.extend(schedule)
    for extension in extra_extensions:
        manager.extend(extension)
    if not args.no_progress:
        manager.extend(
            extensions.ProgressBar(
                training_length=(epochs, 'epoch'), update_interval=max(1, iters_per_epoch // 4)
            )
        )
    if snapshot is not None:
        check_resumable(args, snapshot, epochs * iters_per_epoch)
        for saved in snapshot.get('optimizers', {}).values():
            adopt_kernels(saved, optimizer)
        # An extension the snapshot's run did not have (one from before EarlyStopping, whose
        # patience then starts afresh as it did; a ProgressBar, resumed without --no-progress)
        # starts as this run's: ppe's loading needs every one.
        fresh = manager.state_dict()['extensions']
        for name, state in fresh.items():
            snapshot.setdefault('extensions', {}).setdefault(name, state)
        try:
            manager.load_state_dict(snapshot)
        except RuntimeError as error:  # torch's state_dict mismatch: another architecture
            detail = ' '.join(str(error).split())[:300]
            raise ValueError(
                f'{args.resume} is a snapshot of another model than these flags build ({detail}); '
                '--resume needs the flags the run was started with (a mixture run started '
                'before local frames: --model-config \'{"local_frames": false}\')'
            ) from None
        logger.info('resumed from %s at epoch %d', args.resume, manager.epoch)
    # This run's first snapshot would write over a stopped run's in --out: that is kept aside.
    keep_unfinished_snapshot(args.out / SNAPSHOT_FILE, args.resume)

    # fp16 gradients underflow without loss scaling; bf16 and float32 need none.
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == 'fp16')
    generator = torch.Generator().manual_seed(args.seed)
    budget = None
    if args.max_time is not None:
        with torch.no_grad():
            budget = TimeBudget(
                args.max_time * 60.0,
                started,
                device,
                iters_per_epoch,
                lambda: [validate(*batch) for batch in val_loader],
            )
    planned_epochs = epochs
    recorded = False
    while not manager.stop_trigger and manager.epoch < planned_epochs:
        if budget is not None and manager.epoch > 0 and budget.out_of_time():
            logger.info('--max-time reached after %d epochs', manager.epoch)
            break
        # Epoch-seeded order: a resumed run sees the batches the interrupted one would have.
        generator.manual_seed(args.seed * 1_000_003 + manager.epoch)
        order = torch.randperm(len(train_poses), generator=generator).to(device)
        first_epoch = manager.epoch == 0
        model.train()
        for index in range(iters_per_epoch):
            if signalled():
                raise KeyboardInterrupt  # the signal's own was lost (see above)
            if not recorded and index == iters_per_epoch - 1:
                # ppe writes this run's first snapshot as this iteration ends: its record goes
                # first, so no snapshot of this run is ever without one (written after the
                # epoch, a Ctrl-C in between left the snapshot bare, and the next run in --out
                # wrote over it instead of keeping it aside).
                write_run_record(args.out / SNAPSHOT_FILE, record, finished=False)
                recorded = True
            # The epoch's last iteration ends with its validation, its line, its plot and its
            # snapshot: a Ctrl-C there (where people press it, seeing the line) waits until
            # the snapshot is on disk; it cut the write short, and the run lost the epoch.
            whole = signals_held() if index == iters_per_epoch - 1 else contextlib.nullcontext()
            with whole, manager.run_iteration():
                batch = order[index * batch_size : (index + 1) * batch_size]
                with torch.autocast(
                    device.type, dtype=AMP_DTYPES.get(args.amp), enabled=args.amp != 'off'
                ):
                    loss, _ = loss_fn(model, chain, train_poses[batch], train_joints[batch])
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                # A tensor, not .item(): no wait on the device each step (ppe averages it lazily).
                ppe.reporting.report({'train/loss': loss.detach()})
            timed = budget is not None and first_epoch
            fitted = budget.iteration_done(index, epochs) if timed else None
            if fitted is not None:
                planned_epochs = fitted
                if schedule is not None:  # the one cycle, carried on over the epochs that fit
                    schedule.scheduler = one_cycle(
                        optimizer, settings['lr'], fitted * iters_per_epoch, done=index + 1
                    )
                logger.info(
                    '--max-time %g min: %d of at most %d epochs fit (%s)',
                    args.max_time,
                    fitted,
                    epochs,
                    budget.timing(),
                )
                if budget.overrun_s() > 0.0:
                    logger.warning(
                        '--max-time %g min: one epoch is longer; the first runs to its end, '
                        '%.1f min past it (fewer samples, e.g. --synthetic, or a larger '
                        '--batch-size, make an epoch shorter)',
                        args.max_time,
                        budget.overrun_s() / 60.0,
                    )  # fmt: skip

    stopped_early_at = manager.epoch if early.fired else None
    manager.finalize()  # the loop may end before --epochs: close the progress bar and writers
    best.restore()
    wall_time_s = time.monotonic() - started
    total_s = history.wall_time_s()  # over every run it records
    training = {
        'command': command,
        'commands': history.commands,  # the first run's, then each resume's
        'settings': settings,
        'model_config': model_config,
        'init_from': str(args.init_from) if base else None,
        'seed': args.seed,
        'data': counts,
        'epochs_run': manager.epoch,
        'max_time_min': args.max_time,
        'planned_epochs': planned_epochs,
        'best_val_loss': best.value,
        'best_epoch': best.epoch,
        'wall_time_s': total_s,
        'device': str(device),
        'amp': args.amp,
        'sample_fk_weight': args.sample_fk_weight,
        'torch': str(torch.__version__),
    }
    path = save_checkpoint(args.save_model, model.cpu(), args.model, chain, training)
    write_run_record(args.out / SNAPSHOT_FILE, record, True, stopped_early_at)
    resumed = (
        f' ({total_s:.0f} s over its {len(history.commands)} runs)'
        if len(history.commands) > 1 and None not in history.commands
        else ''
    )
    logger.info(
        'wrote %s after %d epochs in %.0f s%s (%s)',
        path,
        manager.epoch,
        wall_time_s,
        resumed,
        best.describe(),
    )
    return path


class PlainText:
    """PrintReport's stream without a progress bar: ppe erases the bar below each line with a
    terminal code (ESC [J), which is noise in the logs and CI output --no-progress is for."""

    ERASE_BELOW = '\033[J'

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(text.replace(self.ERASE_BELOW, ''))

    def flush(self) -> None:
        self.stream.flush()


def log_scale(figure, axes, summary) -> None:
    """The loss falls by orders of magnitude: only a log axis shows its late progress."""
    axes.set_yscale('log')


def report(prefix: str, result: tuple[torch.Tensor, dict[str, torch.Tensor]]) -> None:
    """Report a loss and its figures (per-sample figures as their batch median)."""
    loss, figures = result
    values = {f'{prefix}/loss': loss.item()}
    values.update({f'{prefix}/{k}': v.median().item() for k, v in figures.items()})
    ppe.reporting.report(values)


class BestModel(ppe.training.extension.Extension):
    """Keeps the weights with the lowest validation loss; early stopping runs past them."""

    trigger = (1, 'epoch')
    priority = ppe.training.extension.PRIORITY_WRITER

    def __init__(self, model: IKNetwork) -> None:
        self.model = model
        self.value = float('inf')
        self.state: dict[str, torch.Tensor] | None = None
        self.epoch: int | None = None  # the epoch whose weights are kept, where known
        self.position_mm: float | None = None  # its validation position error, where measured

    def __call__(self, manager: ppe.training.ExtensionsManager) -> None:
        loss = manager.observation.get('val/loss')
        if loss is not None and float(loss) < self.value:
            self.value = float(loss)
            self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.epoch = manager.epoch
            position = manager.observation.get('val/position_mm')
            self.position_mm = None if position is None else float(position)

    def describe(self) -> str:
        """The kept weights, for the run's last line: a later epoch may measure better in mm
        and still be not kept, its loss (which the model is chosen by) higher."""
        if self.state is None:
            return "no finite validation loss: the last epoch's weights"
        position = '' if self.position_mm is None else f', {self.position_mm:.3g} mm'
        epoch = 'an epoch before this resume' if self.epoch is None else f'epoch {self.epoch}'
        return f'kept {epoch}: val loss {self.value:.3g}{position}'

    def restore(self) -> None:
        if self.state is not None:
            self.model.load_state_dict(self.state)

    def state_dict(self) -> dict:
        return {
            'value': self.value,
            'state': self.state,
            'epoch': self.epoch,
            'position_mm': self.position_mm,
        }

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state['value'])
        self.state = state['state']
        self.epoch = state.get('epoch')  # None in snapshots from before it was kept
        self.position_mm = state.get('position_mm')


class RunHistory(ppe.training.extension.Extension):
    """The commands a run was started and resumed with, and its wall time over them, carried
    by the snapshot: a resumed run's model says how it came about, not only its last resume."""

    trigger = (1, 'epoch')

    def __init__(self, command: str, started: float) -> None:
        self.commands = [command]
        self.started = started  # time.monotonic() as this run started
        self.earlier_s = 0.0  # the runs before this one, up to the snapshot it resumed

    def __call__(self, manager: ppe.training.ExtensionsManager) -> None:
        pass  # state only

    def wall_time_s(self) -> float:
        return self.earlier_s + time.monotonic() - self.started

    def state_dict(self) -> dict:
        return {'commands': self.commands, 'wall_time_s': self.wall_time_s()}

    def load_state_dict(self, state: dict) -> None:
        if state['commands'] == self.commands:
            # This run's own, filled in for a snapshot from before histories: the runs before
            # it are unknown (None), their time not counted.
            self.commands = [None, *self.commands]
            return
        self.commands = [*state['commands'], *self.commands]
        self.earlier_s = float(state['wall_time_s'])


class EarlyStopping(ppe.training.extension.Extension):
    """Early stopping (ppe's trigger: the validation loss not lower for --patience checks),
    decided as each epoch ends, before the snapshot, so that the snapshot carries its best loss
    and count. As the loop's stop trigger, ppe's counted after the snapshot and kept nothing in
    it: a resumed run started its patience afresh, and trained on past where it had stopped."""

    trigger = (1, 'epoch')
    priority = ppe.training.extension.PRIORITY_EDITOR  # after the Evaluator, before snapshots

    def __init__(self, stop: triggers.EarlyStoppingTrigger) -> None:
        self.stop = stop

    def __call__(self, manager: ppe.training.ExtensionsManager) -> None:
        self.stop(manager)  # a check: its best and count; the loop ends at --epochs itself

    @property
    def fired(self) -> bool:
        """Whether the validation loss has not fallen for --patience checks."""
        return self.stop.count >= self.stop.patience

    def state_dict(self) -> dict:
        # The check window's sum too (ppe's trigger averages the epochs of --check-epochs):
        # resumed mid-window, the check averaged fewer epochs.
        window = self.stop._summary.state_dict()  # ppe keeps it nowhere public
        return {
            'best': self.stop.best,
            'count': self.stop.count,
            'window': window,
        }

    def load_state_dict(self, state: dict) -> None:
        self.stop.best = float(state['best'])
        self.stop.count = int(state['count'])
        if 'window' in state:
            self.stop._summary.load_state_dict(state['window'])


if __name__ == '__main__':
    sys.exit(main())
