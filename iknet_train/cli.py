"""Command-line pieces the train, test and bench tools share: which arm, which recordings, which
model."""

from __future__ import annotations

import argparse
import glob
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from iknet_core.kinematics.chain import OMX_CHAIN, Chain, model_chain_for
from iknet_core.kinematics.robots import EXAMPLE_ROBOTS, named_chain
from iknet_core.kinematics.urdf import chain_from_urdf
from iknet_core.resources import DEFAULT_MODEL, SEED_MODEL, shipped
from iknet_train.bags import bag_identity, bags_below, converted_from, is_bag, load_bag
from iknet_train.data import (
    DEFAULT_TOLERANCE_S,
    Recording,
    find_recordings,
    load_recordings,
    recorded_chain,
)
from iknet_train.synthetic import limit_ranges, synthetic_samples

logger = logging.getLogger(__name__)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where it is None: a flag whose default depends on
    others, or whose help says it in words (the shipped dataset/test)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def add_chain_arguments(
    parser: argparse.ArgumentParser, default: str = "the model's chain, else the OM-X"
) -> None:
    """--chain NAME, or --urdf FILE with --base and --tip: the arm, when no model says it;
    default: what the tool takes without them, for the group's title."""
    group = parser.add_argument_group(f'robot (default: {default})')
    group.add_argument(
        '--chain',
        default=None,
        help=f'a named arm: omx, or {", ".join(sorted(EXAMPLE_ROBOTS))} (their URDFs come from '
        'the example-robot-data package)',
    )
    add_urdf_arguments(group)


def add_urdf_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--urdf FILE with --base and --tip: an arm from its robot description."""
    parser.add_argument(
        '--urdf', type=Path, default=None, help='robot description: a .urdf or .urdf.xacro file'
    )
    parser.add_argument('--base', default=None, help='base link of the chain in --urdf')
    parser.add_argument('--tip', default=None, help='tip link of the chain in --urdf')


def add_position_only_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--position-only',
        action='store_true',
        help='reach the target positions in any orientation (the setting of position-only IK '
        'benchmarks); orientation errors are still reported',
    )


def add_solutions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--solutions',
        type=int,
        default=0,
        metavar='N',
        help='also ask each iknet solver for N solutions per pose and report how many distinct '
        'exact ones it gives (0: do not)',
    )
    parser.add_argument(
        '--solutions-poses',
        type=int,
        default=200,
        help='poses (evenly spaced) the --solutions figure is measured on',
    )


def solutions_subset(args: argparse.Namespace, count: int) -> np.ndarray:
    """Indices of the poses the --solutions figure uses; ValueError for bad values."""
    if args.solutions < 0 or args.solutions_poses < 1:
        raise ValueError(
            f'--solutions must be >= 0 and --solutions-poses >= 1, got {args.solutions} and '
            f'{args.solutions_poses}'
        )
    return np.unique(np.linspace(0, count - 1, min(count, args.solutions_poses)).round()).astype(
        int
    )


def chain_from_args(args: argparse.Namespace) -> Chain | None:
    """The chain --chain or --urdf/--base/--tip name, or None when neither is given."""
    if args.urdf is not None and args.chain is not None:
        raise ValueError('give --chain or --urdf, not both')
    from_urdf = urdf_chain_from_args(args)
    if from_urdf is not None:
        return from_urdf
    return named_chain(args.chain) if args.chain is not None else None


def arm_from_args(args: argparse.Namespace) -> Chain | None:
    """The arm a run measures: --chain or --urdf/--base/--tip (its links, where not given, the
    model's), checked against --model's where both are given, else --model's (a model carries
    its chain, so --model alone names the arm, whatever solvers run: one that needs no network
    must not fall back to the OM-X); None where nothing names one."""
    if args.model is None:
        return chain_from_args(args)
    from iknet_core.checkpoint import load_checkpoint  # torch loads only where a model is read

    model_chain = load_checkpoint(args.model).chain
    if args.urdf is not None:  # its links, where not given: the model's
        args.base = args.base or model_chain.base_frame
        args.tip = args.tip or model_chain.tip_frame
    return model_chain_for(chain_from_args(args), model_chain, args.model)


def urdf_chain_from_args(args: argparse.Namespace) -> Chain | None:
    """The chain --urdf/--base/--tip name, or None without --urdf."""
    if args.urdf is None:
        if args.base or args.tip:
            raise ValueError('--base and --tip name links of a --urdf; give the --urdf too')
        return None
    if not (args.base and args.tip):
        raise ValueError('--urdf needs --base and --tip (the links the chain runs between)')
    return chain_from_urdf(args.urdf, args.base, args.tip)


def add_recording_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    default: Path,
    allow_none: bool = False,
) -> None:
    """--data, the reference IKNet's CSV flags and --tolerance-ms; default: a shipped folder."""
    data_help = (
        'recording directories or globs, or rosbag2 bags (a bag directory, .mcap or .db3 file '
        f'with /joint_states and optionally /kinematics_pose) (default: the shipped {default})'
    )
    if allow_none:
        data_help += '; give --data without a value to use no recording'
    parser.add_argument('--data', nargs='*' if allow_none else '+', default=None, help=data_help)
    parser.add_argument(
        '--kinematics-pose-csv',
        action='append',
        default=[],
        help='a kinematics_pose.csv; repeat, paired in order with --joint-states-csv',
    )
    parser.add_argument(
        '--joint-states-csv',
        action='append',
        default=[],
        help='a joint_states.csv; repeat, paired in order with --kinematics-pose-csv',
    )
    parser.add_argument(
        '--tolerance-ms',
        type=float,
        default=DEFAULT_TOLERANCE_S * 1e3,
        help='pose and joint state stamps closer than this are one sample',
    )


def recordings_from_args(args: argparse.Namespace, chain: Chain, default: Path) -> list[Recording]:
    """The recordings the flags of add_recording_arguments name (CSV pairs, then --data)."""
    if len(args.kinematics_pose_csv) != len(args.joint_states_csv):
        raise ValueError(
            f'{len(args.kinematics_pose_csv)} --kinematics-pose-csv but '
            f'{len(args.joint_states_csv)} --joint-states-csv; give them in pairs'
        )
    pairs = list(zip(args.kinematics_pose_csv, args.joint_states_csv, strict=True))
    bags: list[Path] = []
    if args.data is None and not pairs:
        pairs = find_recordings([shipped(default)])
    for entry in expand_globs(args.data or []):
        if is_bag(entry):
            bags.append(Path(entry))
        else:  # recordings, bags, or both in it or below
            inside = bags_below(entry)
            pairs += find_recordings([entry], none_below_ok=bool(inside))
            bags += inside
    read = _once(bags, bag_identity)
    recordings = []
    for pair in _once(pairs, _pair_identity).values():
        if converted_from(pair[0]) in read:  # iknet-convert's CSVs beside their bag: twice over
            logger.warning('%s was converted from a bag that is read too: left out', pair[0])
        else:
            recordings.append(pair)
    tolerance_s = args.tolerance_ms * 1e-3
    return load_recordings(recordings, chain, tolerance_s) + [
        load_bag(bag, chain, tolerance_s) for bag in read.values()
    ]


def _pair_identity(pair: tuple[Path | str, Path | str]) -> tuple[Path, Path]:
    return Path(pair[0]).resolve(), Path(pair[1]).resolve()


def _once(items: list, identity: Callable[[Any], Any]) -> dict:
    """items by their identity, in order, each once: a recording named twice (a folder and a
    glob, a bag and its file) would put the same samples on both sides of the validation
    split."""
    unique: dict = {}
    for item in items:
        key = identity(item)
        if key in unique:
            named = ' and '.join(map(str, item)) if isinstance(item, tuple) else item
            logger.warning('%s is named twice: read once', named)
        else:
            unique[key] = item
    return unique


def chain_from_recordings(args: argparse.Namespace) -> Chain | None:
    """The arm the recordings that --data and the CSV flags name were made for (the recorder's
    metadata.json), None where none says: training on them needs no --chain or --urdf."""
    pairs = list(zip(args.kinematics_pose_csv, args.joint_states_csv, strict=False))
    for entry in expand_globs(args.data or []):
        if Path(entry).is_dir() and not is_bag(entry):
            pairs += find_recordings([entry], none_below_ok=True)
    chain = recorded_chain(pairs)
    if chain is not None:
        logger.info('the arm the recordings were made for: %s', chain.name)
    return chain


def expand_globs(entries: list[str]) -> list[str]:
    """--data entries with their globs expanded (the shell's, when it left them quoted); a glob
    that matches nothing is kept, for find_recordings to name."""
    expanded = []
    for entry in entries:
        text = str(entry)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else []
        expanded += matches or [text]
    return expanded


def add_target_arguments(parser: argparse.ArgumentParser, default: Path) -> None:
    """Where test poses come from: the recording flags, or --samples for an arm without any.
    The parser also needs --seed (it seeds the samples)."""
    add_recording_arguments(parser, default, allow_none=True)
    parser.add_argument(
        '--samples',
        type=int,
        default=10000,
        help='where no recording is read (an arm other than the OM-X without --data, or --data '
        'without a value): poses of this many joint vectors drawn uniformly in its limits',
    )


def reads_recordings(args: argparse.Namespace, chain: Chain) -> bool:
    """Whether the recording flags apply: the shipped recordings are the OM-X's default; another
    arm reads recordings only when the flags name some; --data without a value reads none."""
    if args.kinematics_pose_csv or args.joint_states_csv:
        return True  # recordings_from_args names an unpaired one
    if args.data is not None:
        return bool(args.data)
    return chain == OMX_CHAIN


def target_poses(
    args: argparse.Namespace, chain: Chain, default: Path
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Poses (B, 7) with joints that reach them (B, n), and where they come from: recordings
    (the shipped ones for the OM-X), else FK of joints uniform in the limits (--samples)."""
    if reads_recordings(args, chain):
        recordings = recordings_from_args(args, chain, default)
        source = {
            'recordings': [r.source for r in recordings],
            'sampled_poses': 0,
            'dropped_poses': sum(r.dropped_poses for r in recordings),
            'dropped_joint_states': sum(r.dropped_joint_states for r in recordings),
        }
        return (
            np.concatenate([r.poses for r in recordings]),
            np.concatenate([r.joints for r in recordings]),
            source,
        )
    if args.samples < 1:
        raise ValueError(f'--samples must be >= 1, got {args.samples}')
    poses, joints = synthetic_samples(chain, args.samples, args.seed, limit_ranges(chain))
    logger.info(
        '%s: no recording read; %d poses of joints uniform in its limits (seed %d)',
        chain.name, args.samples, args.seed,
    )  # fmt: skip
    source = {
        'recordings': [],
        'sampled_poses': len(poses),
        'dropped_poses': 0,
        'dropped_joint_states': 0,
    }
    return poses, joints, source


def add_model_argument(parser: argparse.ArgumentParser, solvers: bool = True) -> None:
    """--model: a checkpoint file, default the shipped model (per learned solver where the
    command runs solvers)."""
    default = f'the shipped {DEFAULT_MODEL}'
    if solvers:
        default += f'; network+refine is seeded by the shipped {SEED_MODEL}'
    parser.add_argument(
        '--model', type=Path, default=None, help=f'checkpoint (default: {default})'
    )
