"""The test command: a table, a JSON report with the agreed keys, and plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from model_helpers import tiny_model_and_recording

from iknet_core.resources import DEFAULT_MODEL, TEST_DATA, shipped
from iknet_train.evaluate import main, reference_loss

SUMMARY_KEYS = {'mean', 'median', 'p95', 'p99', 'max'}


@pytest.fixture(scope='module')
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return tiny_model_and_recording(tmp_path_factory.mktemp('evaluate'), seed=9)


def test_writes_json_with_the_agreed_keys_and_plots(files, tmp_path: Path, capsys) -> None:
    model, recording = files
    report_path, plots = tmp_path / 'report.json', tmp_path / 'plots'
    argv = ['--model', str(model), '--data', str(recording), '--json', str(report_path),
            '--plots', str(plots), '--timing-queries', '20']  # fmt: skip
    assert main(argv) == 0

    report = json.loads(report_path.read_text())
    assert report['n_samples'] == 300
    assert set(report['position_error_mm']) == SUMMARY_KEYS
    assert set(report['orientation_error_deg']) == SUMMARY_KEYS
    assert set(report['joint_error_rad']) == {'joint1', 'joint2', 'joint3', 'joint4'}
    assert set(report['within_mm']) == {'1', '5', '10'}
    assert report['time_per_query_us'] > 0 and report['queries_per_s'] > 0
    assert report['reference_loss'] > 0
    for name in ('error_histogram.png', 'workspace_error.png', 'worst_cases.png'):
        assert (plots / name).stat().st_size > 1000
    table = capsys.readouterr().out
    assert 'position error (mm)' in table and 'within 5 mm' in table
    assert f'wrote {report_path} and the plots in {plots}' in table  # where to look


def test_the_table_lists_joints_in_the_chains_order_and_fits_long_names() -> None:
    from iknet_train.evaluate import format_table

    figures = dict.fromkeys(SUMMARY_KEYS, 0.5)
    report = {
        'solver': 'network', 'model': None, 'n_samples': 3, 'position_error_mm': figures,
        'orientation_error_deg': figures, 'joint_names': ['yaw', 'lift', 'a_very_long_joint_name'],
        'joint_error_rad': {'yaw': figures, 'a_very_long_joint_name': figures},
        'joint_error_m': {'lift': figures}, 'within_mm': {'1': 1.0},
        'time_per_query_us': 1.0, 'queries_per_s': 1.0, 'reference_loss': 0.1,
    }  # fmt: skip
    lines = format_table(report).splitlines()
    labels = [line.split(' error')[0] for line in lines if ' error (' in line]
    assert labels == ['position', 'orientation', 'yaw', 'lift', 'a_very_long_joint_name']
    columns = {line.index('0.5') for line in lines if ' error (' in line}
    assert len(columns) <= 2  # 0.500 and 0.5000 right-aligned: one column start per precision


def test_takes_the_reference_csv_flags(files, tmp_path: Path) -> None:
    model, recording = files
    argv = [
        '--model', str(model),
        '--kinematics-pose-csv', str(recording / 'kinematics_pose.csv'),
        '--joint-states-csv', str(recording / 'joint_states.csv'),
        '--json', str(tmp_path / 'r.json'), '--plots', '', '--timing-queries', '5',
    ]  # fmt: skip
    assert main(argv) == 0
    assert json.loads((tmp_path / 'r.json').read_text())['n_samples'] == 300
    assert not (tmp_path / 'iknet_test_plots').exists()


def test_reference_loss_is_the_norm_over_a_batch_divided_by_its_size() -> None:
    joints = np.zeros((4, 4))
    predicted = joints.copy()
    predicted[:, 0] = 0.5
    predicted[0, 0] = 0.5 - 2 * np.pi  # the same angle
    assert reference_loss(predicted, joints, batch_size=2) == pytest.approx(np.sqrt(0.5) / 2)


def test_a_broken_model_file_fails_with_a_message(files, tmp_path: Path, capsys) -> None:
    _, recording = files
    bad = tmp_path / 'bad.pt'
    bad.write_bytes(b'nope')
    assert main(['--model', str(bad), '--data', str(recording), '--plots', '']) == 1
    assert 'not a readable iknet checkpoint' in capsys.readouterr().err
    assert main(['--data', str(recording), '--plots', '', '--timing-queries', '-1']) == 1
    assert '--timing-queries must be >= 1, got -1' in capsys.readouterr().err
    assert main(['--data', str(recording), '--plots', '', '--batch-size', '0']) == 1
    assert '--batch-size must be >= 1, got 0' in capsys.readouterr().err
    (tmp_path / 'file').write_text('')
    for flags, message in (  # refused before the evaluation, not after it
        (('--json', str(tmp_path)), 'is a directory; give a file name'),
        (('--plots', str(tmp_path / 'file')), 'file is a file, not a folder'),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(['--data', str(recording), *flags])
        assert stopped.value.code == 2 and message in capsys.readouterr().err, flags


def test_shipped_model_meets_its_targets_on_the_shipped_test_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`iknet-test` with no flags, as the README shows it."""
    try:
        shipped(DEFAULT_MODEL), shipped(TEST_DATA)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    monkeypatch.chdir(tmp_path)
    assert main(['--timing-queries', '50']) == 0

    report = json.loads((tmp_path / 'iknet_test.json').read_text())
    assert report['position_error_mm']['median'] <= 1.0
    assert report['position_error_mm']['p95'] <= 5.0
    assert (tmp_path / 'iknet_test_plots' / 'error_histogram.png').is_file()


def test_data_without_a_value_tests_the_omx_on_poses_across_its_limits(
    files, tmp_path: Path
) -> None:
    model, _ = files  # an OM-X model: its recordings would be the default
    path = tmp_path / 'limits.json'
    argv = ['--model', str(model), '--data', '--samples', '40', '--seed', '3', '--json',
            str(path), '--plots', '', '--timing-queries', '5', '--solver', 'analytic']  # fmt: skip
    assert main(argv) == 0
    report = json.loads(path.read_text())
    assert report['n_samples'] == 40
    assert report['data']['recordings'] == [] and report['data']['sampled_poses'] == 40


def test_a_model_names_the_arm_whatever_the_solver(tmp_path: Path, capsys) -> None:
    """--model alone says the arm, for iknet-test and iknet-bench alike: a solver that needs no
    network measures the model's arm, not the OM-X, and another arm named beside it is refused."""
    from iknet_core.checkpoint import save_checkpoint
    from iknet_core.kinematics.robots import named_chain
    from iknet_core.networks import build_model
    from iknet_train.bench import main as bench_main

    chain = named_chain('ur5')
    model = build_model('iknet', {'n_joints': 6, 'width': 8, 'n_blocks': 1})
    path = save_checkpoint(tmp_path / 'ur5.pt', model, 'iknet', chain, {})
    report = tmp_path / 'ur5.json'
    argv = ['--model', str(path), '--solver', 'refine-from-zero', '--data', '--samples', '20',
            '--json', str(report), '--plots', '', '--timing-queries', '5']  # fmt: skip
    assert main(argv) == 0
    assert json.loads(report.read_text())['chain'] == 'ur5'
    assert main([*argv, '--chain', 'panda']) == 1
    assert "ur5.pt was trained for chain 'ur5'" in capsys.readouterr().err
    # Its URDF without --base and --tip: the model's links.
    from iknet_core.kinematics.robots import example_robot_urdf

    assert main([*argv, '--urdf', str(example_robot_urdf('ur5'))]) == 0
    assert main([*argv, '--urdf', str(example_robot_urdf('ur5')), '--tip', 'wrist_3_link']) == 1
    assert 'they differ in' in capsys.readouterr().err
    # Another arm without --model: the shipped OM-X model is not its, and the error says what is.
    assert main(['--chain', 'ur5', '--data', '--samples', '20', '--plots', '']) == 1
    assert 'give its --model, or --solver refine-from-zero' in capsys.readouterr().err
    out = tmp_path / 'bench'
    argv = ['--model', str(path), '--solvers', 'refine-from-zero', '--data', '--samples', '20',
            '--single-queries', '5', '--out', str(out)]  # fmt: skip
    assert bench_main(argv) == 0
    assert json.loads((out / 'bench.json').read_text())['chain'] == 'ur5'


def test_solver_flag_measures_the_server_backends(files, tmp_path: Path, capsys) -> None:
    model, recording = files
    reports = {}
    for solver in ('analytic', 'network+refine', 'network'):
        path = tmp_path / f'{solver}.json'
        argv = ['--model', str(model), '--data', str(recording), '--json', str(path),
                '--plots', '', '--timing-queries', '5', '--solver', solver]  # fmt: skip
        assert main(argv) == 0
        reports[solver] = json.loads(path.read_text())
        assert reports[solver]['solver'] == solver
    assert 'solver analytic on 300 samples' in capsys.readouterr().out
    assert reports['analytic']['model'] is None
    assert reports['analytic']['position_error_mm']['max'] < 1e-6
    assert reports['network+refine']['model'] == str(model)
    # The untrained test model is a poor guess; refinement takes it to the target.
    refined, alone = reports['network+refine'], reports['network']
    assert refined['position_error_mm']['median'] < 1e-3 < alone['position_error_mm']['median']


def test_solutions_flag_prints_distinct_exact_solutions(files, tmp_path: Path, capsys) -> None:
    _, recording = files
    path = tmp_path / 'analytic.json'
    argv = ['--data', str(recording), '--json', str(path), '--plots', '', '--solver', 'analytic',
            '--timing-queries', '5', '--solutions', '4', '--solutions-poses', '30']  # fmt: skip
    assert main(argv) == 0
    diversity = json.loads(path.read_text())['diversity']
    assert diversity['n_poses'] == 30 and diversity['distinct_exact']['mean'] >= 1.0
    assert 'distinct exact solutions per pose (4 asked for, 30 poses)' in capsys.readouterr().out
    assert main([*argv[:-2], '--solutions-poses', '0']) == 1
    assert '--solutions-poses >= 1' in capsys.readouterr().err
