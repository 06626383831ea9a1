"""`iknet-chain`: the chain iknet reads for an arm, to check a URDF before training on it, and the
OM-X preset (or any chain) written out as a URDF."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

from iknet_core.entry import failed
from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.urdf import chain_to_urdf
from iknet_core.output_paths import output_file
from iknet_train.cli import HelpFormatter, add_chain_arguments, chain_from_args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-chain',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    add_chain_arguments(parser, 'the OM-X')
    parser.add_argument(
        '--write-urdf',
        type=output_file,
        default=None,
        help='write the chain as a URDF to this file',
    )
    parser.add_argument('--json', action='store_true', help='print the chain as JSON')
    return parser


def describe(chain: Chain) -> str:
    """The chain as a table: joints, axes, software limits and reach in degrees (a prismatic
    joint's in mm), and which joints are continuous."""
    joints = f'{chain.n_joints} joint{"s" if chain.n_joints != 1 else ""}'
    lines = [f'{chain.name}: {joints} from {chain.base_frame} to {chain.tip_frame}']
    for joint in chain.joints:
        scale, unit = (1e3, 'mm ') if joint.prismatic else (math.degrees(1.0), 'deg')
        limits = ' .. '.join(f'{scale * v:7.1f}' for v in joint.limits)
        reach = ' .. '.join(f'{scale * v:7.1f}' for v in joint.reach)
        axis = ' '.join(f'{a:+.3f}' for a in joint.axis)
        turns_on = '   continuous' if joint.continuous else ''
        lines.append(
            f'  {joint.name:24} axis {axis}   limits {limits} {unit}   reach {reach} {unit}'
            f'{turns_on}'
        )
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        chain = chain_from_args(args) or OMX_CHAIN
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
        return failed('iknet-chain', error)
    print(json.dumps(chain.to_dict(), indent=2) if args.json else describe(chain))
    if args.write_urdf is not None:
        args.write_urdf.parent.mkdir(parents=True, exist_ok=True)
        args.write_urdf.write_text(chain_to_urdf(chain))
        print(f'wrote {args.write_urdf} (base {chain.base_frame}, tip {chain.tip_frame})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
