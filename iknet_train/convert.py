"""`iknet-convert BAG OUT_DIR`: a rosbag2 recording (sqlite3 or MCAP) as the recorder's CSV pair
and metadata.json, for people who want files; every tool also reads the bag itself (--data)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from iknet_core.csv_schema import METADATA_FILE
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import OMX_CHAIN
from iknet_core.output_paths import output_dir
from iknet_train.bags import BagError, convert_bag
from iknet_train.cli import HelpFormatter, add_chain_arguments, chain_from_args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-convert',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument('bag', type=Path, help='bag directory, or a .mcap or .db3 file')
    parser.add_argument('out_dir', type=output_dir, help='directory for the CSV pair (created)')
    add_chain_arguments(parser, default='the OM-X')
    return parser


@exits_on_interrupt('iknet-convert', 'the CSV pair in OUT_DIR may be cut short')
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        chain = chain_from_args(args) or OMX_CHAIN
        if args.out_dir.resolve() == args.bag.resolve():
            raise ValueError(f'{args.out_dir}: write the CSVs beside the bag, not into it')
        pose_csv, joint_csv = convert_bag(args.bag, args.out_dir, chain)
    except (BagError, ValueError, OSError) as error:  # OSError: a file that cannot be read
        return failed('iknet-convert', error)
    metadata = json.loads((args.out_dir / METADATA_FILE).read_text())
    for name, counts in metadata['streams'].items():
        skipped = f', skipped {counts["skipped"]}' if counts['skipped'] else ''
        what = 'messages'
        if name == 'kinematics_pose' and metadata['pose_source'] == 'fk':
            what = 'poses by FK of the joint states (the bag has no pose topic)'
        print(f'{name}: {counts["written"]} {what}{skipped}')
    print(f'wrote {pose_csv}, {joint_csv} and {args.out_dir / METADATA_FILE} ({chain.name})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
