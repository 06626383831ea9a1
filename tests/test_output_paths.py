"""The command-line tools' output paths: refused up front where they could not be written."""

import argparse

import pytest

from iknet_core.output_paths import output_dir, output_file


def test_a_folder_the_system_refuses_is_refused_up_front_even_for_root():
    # /proc takes no new files, whatever os.access tells root.
    with pytest.raises(argparse.ArgumentTypeError, match='/proc/iknet: cannot write in /proc'):
        output_dir('/proc/iknet')
    with pytest.raises(argparse.ArgumentTypeError, match='cannot write in /proc'):
        output_file('/proc/iknet/report.json')


def test_a_folder_still_to_make_is_accepted_and_nothing_is_left_behind(tmp_path):
    assert output_dir(str(tmp_path / 'a' / 'b')) == tmp_path / 'a' / 'b'
    assert output_file(str(tmp_path / 'c' / 'report.json')) == tmp_path / 'c' / 'report.json'
    assert list(tmp_path.iterdir()) == []  # the check writes nothing that stays
