"""Command-line pieces the train, test and bench tools share: which arm, which recordings, which
model."""

from __future__ import annotations

import argparse
from pathlib import Path

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.robots import EXAMPLE_ROBOTS, named_chain
from iknet_core.kinematics.urdf import chain_from_urdf
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.data import DEFAULT_TOLERANCE_S, Recording, find_recordings, load_recordings


def add_chain_arguments(parser: argparse.ArgumentParser) -> None:
    """--chain NAME, or --urdf FILE with --base and --tip: the arm, when no model says it."""
    group = parser.add_argument_group("robot (default: the model's chain, else the OM-X)")
    group.add_argument(
        '--chain',
        default=None,
        help=f'a named arm: omx, or {", ".join(sorted(EXAMPLE_ROBOTS))} (their URDFs come from '
        'the example-robot-data package)',
    )
    group.add_argument(
        '--urdf', type=Path, default=None, help='robot description: a .urdf or .urdf.xacro file'
    )
    group.add_argument('--base', default=None, help='base link of the chain in --urdf')
    group.add_argument('--tip', default=None, help='tip link of the chain in --urdf')


def chain_from_args(args: argparse.Namespace) -> Chain | None:
    """The chain --chain or --urdf/--base/--tip name, or None when neither is given."""
    if args.urdf is not None:
        if args.chain is not None:
            raise ValueError('give --chain or --urdf, not both')
        if not (args.base and args.tip):
            raise ValueError('--urdf needs --base and --tip (the links the chain runs between)')
        return chain_from_urdf(args.urdf, args.base, args.tip)
    if args.base or args.tip:
        raise ValueError('--base and --tip name links of a --urdf; give the --urdf too')
    return named_chain(args.chain) if args.chain is not None else None


def check_same_chain(chain: Chain | None, model_chain: Chain, model: Path | str) -> Chain:
    """The model's chain; ValueError naming both when the flags asked for another arm."""
    if chain is not None and chain != model_chain:
        raise ValueError(
            f'{model} was trained for chain {model_chain.name!r} ({model_chain.joint_names}), '
            f'not {chain.name!r} ({chain.joint_names})'
        )
    return model_chain


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
