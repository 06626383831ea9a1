"""The command-line tools' output paths: refused up front where they could not be written."""

import argparse
from pathlib import Path

import pytest

from iknet_core.output_paths import output_dir, output_file, written_together


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


def test_a_report_is_written_all_together_or_not_at_all(tmp_path: Path) -> None:
    (tmp_path / 'bench.json').write_text('the last run')
    (tmp_path / 'bench.png').write_text('the last run')
    with pytest.raises(KeyboardInterrupt), written_together(tmp_path) as staging:
        (staging / 'bench.json').write_text('this run')
        raise KeyboardInterrupt  # Ctrl-C while the figure is drawn
    assert sorted(path.name for path in tmp_path.iterdir()) == ['bench.json', 'bench.png']
    assert (tmp_path / 'bench.json').read_text() == 'the last run'

    with written_together(tmp_path / 'new') as staging:
        (staging / 'bench.json').write_text('this run')
        (staging / 'plots').mkdir()
        (staging / 'plots' / 'a.png').write_text('this run')
    assert (tmp_path / 'new' / 'bench.json').read_text() == 'this run'
    assert (tmp_path / 'new' / 'plots' / 'a.png').read_text() == 'this run'
    assert sorted(path.name for path in (tmp_path / 'new').iterdir()) == ['bench.json', 'plots']


def test_a_report_clashing_with_a_folder_moves_none_of_its_files(tmp_path: Path) -> None:
    (tmp_path / 'bench.json').write_text('the last run')
    (tmp_path / 'bench.png').mkdir()  # a folder where the figure goes
    clash = pytest.raises(OSError, match=r'bench\.png is a folder')
    with clash, written_together(tmp_path) as staging:
        (staging / 'bench.json').write_text('this run')
        (staging / 'bench.png').write_text('this run')
    assert (tmp_path / 'bench.json').read_text() == 'the last run'
    assert sorted(path.name for path in tmp_path.iterdir()) == ['bench.json', 'bench.png']
