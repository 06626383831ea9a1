"""iknet-chain, and the --chain / --urdf flags of the tools, on an arm that is not the OM-X."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.urdf import chain_from_urdf, chain_to_urdf
from iknet_train import bench, chain_tool, evaluate

# A longer-armed OM-X: another chain the closed form does not know.
LONG_ARM = Chain.from_dict(
    {
        **OMX_CHAIN.to_dict(),
        'name': 'long_arm',
        'tip_xyz': (0.2, 0.0, 0.05),
        'tip_rpy': (0.0, 0.3, 0.0),
    }
)


def test_iknet_chain_writes_the_omx_preset_as_urdf(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / 'omx.urdf'
    assert chain_tool.main(['--chain', 'omx', '--write-urdf', str(path)]) == 0
    printed = capsys.readouterr().out
    assert 'open_manipulator_x: 4 joints from world to end_effector_link' in printed
    assert chain_from_urdf(path, 'world', 'end_effector_link') == OMX_CHAIN


def test_iknet_chain_prints_a_urdf_chain_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / 'long.urdf'
    path.write_text(chain_to_urdf(LONG_ARM))
    flags = ['--urdf', str(path), '--base', 'world', '--tip', 'end_effector_link', '--json']
    assert chain_tool.main(flags) == 0
    assert Chain.from_dict(json.loads(capsys.readouterr().out)) == LONG_ARM


def test_iknet_chain_marks_a_continuous_joint(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / 'continuous.urdf'
    path.write_text(
        chain_to_urdf(OMX_CHAIN).replace(
            '<joint name="joint1" type="revolute">', '<joint name="joint1" type="continuous">'
        )
    )
    assert (
        chain_tool.main(['--urdf', str(path), '--base', 'world', '--tip', 'end_effector_link'])
        == 0
    )
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines['joint1'].endswith('continuous'), lines['joint1']
    assert not lines['joint2'].endswith('continuous'), lines['joint2']


@pytest.mark.parametrize(
    ('flags', 'message'),
    [
        (['--urdf', 'arm.urdf'], '--urdf needs --base and --tip'),
        (['--base', 'world'], 'give the --urdf too'),
        (['--chain', 'nao'], "unknown chain 'nao'"),
    ],
)
def test_chain_flags_that_name_no_chain_are_refused(
    flags: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert chain_tool.main(flags) == 1
    assert message in capsys.readouterr().err


def test_a_urdf_output_that_could_not_be_written_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as stopped:
        chain_tool.main(['--write-urdf', str(tmp_path)])
    assert stopped.value.code == 2
    assert f'argument --write-urdf: {tmp_path} is a directory' in capsys.readouterr().err


def test_iknet_test_samples_poses_for_an_arm_without_recordings(tmp_path: Path) -> None:
    urdf = tmp_path / 'long.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    report_path = tmp_path / 'report.json'
    flags = [
        '--urdf', str(urdf), '--base', 'world', '--tip', 'end_effector_link',
        '--solver', 'refine-from-zero', '--samples', '40', '--timing-queries', '5',
        '--plots', '', '--json', str(report_path),
    ]  # fmt: skip
    assert evaluate.main(flags) == 0
    report = json.loads(report_path.read_text())
    assert report['chain'] == 'long_arm'
    assert report['data'] == {
        'recordings': [],
        'sampled_poses': 40,
        'dropped_poses': 0,
        'dropped_joint_states': 0,
    }
    assert report['n_samples'] == 40


def test_iknet_test_refuses_a_model_of_another_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    urdf = tmp_path / 'long.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    flags = ['--urdf', str(urdf), '--base', 'world', '--tip', 'end_effector_link']
    assert evaluate.main([*flags, '--solver', 'network']) == 1
    error = capsys.readouterr().err
    assert "trained for chain 'open_manipulator_x'" in error and "not 'long_arm'" in error


def test_iknet_bench_on_an_arm_without_recordings_skips_what_it_cannot_run(
    tmp_path: Path,
) -> None:
    urdf = tmp_path / 'long.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    flags = [
        '--urdf', str(urdf), '--base', 'world', '--tip', 'end_effector_link',
        '--solvers', 'refine-from-zero', 'analytic', 'network', '--samples', '30',
        '--single-queries', '5', '--batch-seconds', '0', '--out', str(tmp_path / 'bench'),
    ]  # fmt: skip
    assert bench.main(flags) == 0
    report = json.loads((tmp_path / 'bench' / 'bench.json').read_text())
    assert report['chain'] == 'long_arm' and report['data']['sampled_poses'] == 30
    assert report['data']['reachable'] == 1.0  # FK of joints inside the limits
    assert list(report['solvers']) == ['refine-from-zero']
    assert report['skipped'] == {
        'analytic': "not available for chain 'long_arm'",
        'network': "no model for chain 'long_arm' (give --model)",
    }


def test_a_model_trained_from_a_urdf_carries_its_chain_to_iknet_test(tmp_path: Path) -> None:
    from iknet_core.checkpoint import load_checkpoint
    from iknet_train import train

    urdf = tmp_path / 'long.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    model = tmp_path / 'long.pt'
    flags = [
        '--urdf', str(urdf), '--base', 'world', '--tip', 'end_effector_link',
        '--synthetic', '2000', '--epochs', '2', '--batch-size', '256', '--no-progress',
        '--model-config', '{"width": 32, "n_blocks": 1}',
        '--save-model', str(model), '--out', str(tmp_path / 'train'),
    ]  # fmt: skip
    assert train.main(flags) == 0
    checkpoint = load_checkpoint(model)
    assert checkpoint.chain == LONG_ARM and checkpoint.training['data']['recorded_train'] == 0
    report_path = tmp_path / 'report.json'
    flags = ['--model', str(model), '--solver', 'network+refine', '--samples', '30',
             '--timing-queries', '5', '--plots', '', '--json', str(report_path)]  # fmt: skip
    assert evaluate.main(flags) == 0
    report = json.loads(report_path.read_text())
    assert report['chain'] == 'long_arm' and report['data']['sampled_poses'] == 30


def test_position_only_flag_reaches_positions_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    urdf = tmp_path / 'long.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    report_path = tmp_path / 'report.json'
    arm = ['--urdf', str(urdf), '--base', 'world', '--tip', 'end_effector_link', '--samples', '40']
    flags = [*arm, '--solver', 'refine-from-zero', '--position-only', '--timing-queries', '5',
             '--plots', '', '--json', str(report_path)]  # fmt: skip
    assert evaluate.main(flags) == 0
    report = json.loads(report_path.read_text())
    assert report['position_only'] is True
    assert report['within_mm']['1'] == 1.0
    assert evaluate.main([*arm, '--solver', 'analytic', '--position-only']) == 1
    assert 'analytic solves whole poses' in capsys.readouterr().err
