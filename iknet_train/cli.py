"""Command-line pieces the train, test and bench tools share: which recordings, which model."""

from __future__ import annotations

import argparse
from pathlib import Path

from iknet_core.kinematics.chain import Chain
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.data import DEFAULT_TOLERANCE_S, Recording, find_recordings, load_recordings


def add_recording_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    default: Path,
    allow_none: bool = False,
) -> None:
    """--data, the reference IKNet's CSV flags and --tolerance-ms; default: a shipped folder."""
    data_help = f'recording directories or globs (default: the shipped {default})'
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
    if args.data is None and not pairs:
        pairs = find_recordings([shipped(default)])
    elif args.data:
        pairs += find_recordings(args.data)
    return load_recordings(pairs, chain, args.tolerance_ms * 1e-3)


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """--model: a checkpoint file, default the shipped model."""
    parser.add_argument(
        '--model',
        type=Path,
        default=None,
        help=f'checkpoint (default: the shipped {DEFAULT_MODEL})',
    )
