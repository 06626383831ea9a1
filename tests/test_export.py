"""ONNX export: a batch dimension, and onnxruntime gives what torch gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from model_helpers import condition_head

from iknet_core.checkpoint import load_checkpoint, save_checkpoint
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import wrapped_difference
from iknet_core.networks import build_model
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.export import OPSETS, export, main
from iknet_train.synthetic import synthetic_samples


@pytest.fixture(scope='module')
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    poses, _ = synthetic_samples(OMX_CHAIN, 500, seed=1)
    torch.manual_seed(0)
    model = build_model('iknet', {'width': 32, 'n_blocks': 1})
    model.fit_normalization(torch.as_tensor(poses, dtype=torch.float32))
    condition_head(model, 0.1)
    return save_checkpoint(tmp_path_factory.mktemp('export') / 'm.pt', model, 'iknet', OMX_CHAIN)


@pytest.mark.parametrize('batch', [1, 37])
def test_onnx_equals_torch_for_any_batch_size(
    model_path: Path, tmp_path: Path, batch: int
) -> None:
    output, differences, beyond = export(model_path, tmp_path / 'm.onnx', check_samples=200)
    assert list(differences) == ['rad'] and differences['rad'] < 1e-4 and beyond == 0.0

    poses = synthetic_samples(OMX_CHAIN, batch, seed=5)[0].astype(np.float32)
    session = onnxruntime.InferenceSession(str(output), providers=['CPUExecutionProvider'])
    (hypotheses,) = session.run(None, {'poses': poses})
    with torch.inference_mode():
        expected = load_checkpoint(model_path).model(torch.from_numpy(poses)).numpy()
    assert hypotheses.shape == (batch, 4, 4)
    assert np.abs(wrapped_difference(hypotheses.astype(np.float64), expected)).max() < 1e-4


def test_cli_prints_the_difference_and_fp16_halves_the_weights(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    half, full = tmp_path / 'half.onnx', tmp_path / 'full.onnx'
    assert main(['--model', str(model_path), '--output', str(full)]) == 0
    assert main(['--model', str(model_path), '--output', str(half), '--fp16']) == 0
    assert capsys.readouterr().out.count('max joint difference') == 2
    weights = [i for i in onnx.load(str(half)).graph.initializer if len(i.dims) == 2]
    assert weights and all(i.data_type == onnx.TensorProto.FLOAT16 for i in weights)


@pytest.mark.parametrize('opset', [5, 99])
def test_an_opset_the_exporter_does_not_write_is_refused_in_one_line(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture, opset: int
) -> None:
    output = tmp_path / 'm.onnx'
    with pytest.raises(SystemExit) as exit_:
        main(['--model', str(model_path), '--output', str(output), '--opset', str(opset)])
    assert exit_.value.code == 2 and not output.exists()
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith('iknet-export: error: argument --opset: ')
    assert f'give {OPSETS.start} to {OPSETS.stop - 1}' in error


def test_an_output_that_could_not_be_written_is_refused_before_the_export(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(['--model', str(model_path), '--output', str(tmp_path)])
    assert exit_.value.code == 2
    assert 'argument --output: ' in capsys.readouterr().err
    assert not list(tmp_path.glob('*.onnx'))


def test_check_samples_counts_the_poses_compared_and_refuses_none(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    output = tmp_path / 'm.onnx'
    assert main(['--model', str(model_path), '--output', str(output), '--check-samples', '0']) == 1
    assert capsys.readouterr().err.strip() == (
        'iknet-export: error: --check-samples must be at least 1 (every export is checked), got 0'
    )
    assert not output.exists()
    assert main(['--model', str(model_path), '--output', str(output), '--check-samples', '1']) == 0
    assert 'onnxruntime vs torch on 1 poses' in capsys.readouterr().out


def test_a_chain_with_a_slide_reports_its_difference_in_metres(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from test_prismatic import SCARA  # 4 joints, as the OM-X model: its third slides

    checkpoint = load_checkpoint(model_path)
    scara = save_checkpoint(tmp_path / 'scara.pt', checkpoint.model, 'iknet', SCARA)
    output, differences, _ = export(scara, tmp_path / 'scara.onnx', check_samples=50)
    assert list(differences) == ['rad', 'm'] and max(differences.values()) < 1e-4
    assert main(['--model', str(scara), '--output', str(output)]) == 0
    assert capsys.readouterr().out.strip().endswith(' m')


def test_fp16_export_of_the_shipped_model_is_close(tmp_path: Path) -> None:
    """Judged on trained weights: an untrained network's fp16 error depends on its random init
    (0.001 to 0.02 rad over 20 inits), a trained one's does not."""
    try:
        model = shipped(DEFAULT_MODEL)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    half = tmp_path / 'half.onnx'
    assert main(['--model', str(model), '--output', str(half), '--fp16']) == 0
    poses = synthetic_samples(OMX_CHAIN, 1000, seed=6)[0].astype(np.float32)
    session = onnxruntime.InferenceSession(str(half), providers=['CPUExecutionProvider'])
    (hypotheses,) = session.run(None, {'poses': poses})
    with torch.inference_mode():
        expected = load_checkpoint(model).model(torch.from_numpy(poses)).numpy()
    assert hypotheses.dtype == np.float32
    # Measured: 0.004 rad at most on 3,000 poses.
    assert np.abs(wrapped_difference(hypotheses.astype(np.float64), expected)).max() < 0.01


def test_default_exports_the_shipped_model_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    try:
        shipped(DEFAULT_MODEL)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    assert (tmp_path / 'omx_iknet.onnx').is_file()
    difference = float(capsys.readouterr().out.split('difference ')[1].split()[0])
    assert difference < 1e-4


def test_an_output_naming_the_model_itself_is_refused_and_the_model_kept(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    copy = tmp_path / 'mine.pt'
    copy.write_bytes(model_path.read_bytes())
    assert main(['--model', str(copy), '--output', str(copy)]) == 1
    assert 'is the model file itself' in capsys.readouterr().err
    assert copy.read_bytes() == model_path.read_bytes()


def test_an_export_that_disagrees_with_torch_fails_and_says_by_how_much(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    # fp16 moves every hypothesis a little: with no tolerance at all, every one is beyond it.
    monkeypatch.setattr('iknet_train.export.CHECK_TOLERANCE', {'rad': 0.0, 'm': 0.0})
    half = tmp_path / 'half.onnx'
    assert main(['--model', str(model_path), '--output', str(half), '--fp16']) == 1
    error = capsys.readouterr().err
    assert f'{half} does not agree with the float32 network in torch' in error, error
    assert 'allowed: 0.1%' in error, error
    assert half.is_file()  # kept for inspection, but not stamped: never served for the model
    from iknet_core.onnx_graph import exported_from

    assert not exported_from(half, model_path)


def test_only_a_graph_exported_from_the_checkpoint_itself_is_served_beside_it(
    model_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from iknet_core.onnx_graph import exported_from
    from iknet_core.solvers.network import NetworkProposer

    mine = tmp_path / 'mine.pt'
    mine.write_bytes(model_path.read_bytes())
    graph = tmp_path / 'mine.onnx'
    export(mine, graph, check_samples=10)
    assert exported_from(graph, mine)
    # Another network saved over the checkpoint afterwards: the graph beside it, newer or not,
    # is no longer its export, and onnxruntime serves the checkpoint's own network.
    other = build_model('iknet', {'width': 16, 'n_blocks': 1, 'n_hypotheses': 2})
    other.fit_normalization(torch.as_tensor(synthetic_samples(OMX_CHAIN, 100, 2)[0]).float())
    save_checkpoint(mine, other, 'iknet', OMX_CHAIN)
    graph.touch()
    assert not exported_from(graph, mine)
    poses = synthetic_samples(OMX_CHAIN, 5, seed=3)[0]
    served = NetworkProposer(mine, backend='onnxruntime')(
        poses[:, :3], matrix_from_quaternion(poses[:, 3:])
    )
    assert served.shape == (5, 2, 4)  # the new network's two hypotheses, not the graph's four
    assert f'{graph} is not stamped as exported from {mine}' in caplog.text
    garbage = tmp_path / 'bad.onnx'
    garbage.write_bytes(b'not a graph')
    assert not exported_from(garbage, mine)


def test_an_export_stopped_during_its_check_leaves_the_earlier_file(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    import os
    import signal

    output = tmp_path / 'model.onnx'
    output.write_bytes(b'an earlier export')

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # as kill or a job scheduler stops it

    monkeypatch.setattr('iknet_train.export.compare_with_torch', stopped)
    assert main(['--model', str(model_path), '--output', str(output)]) == 128 + signal.SIGTERM
    assert 'iknet-export: interrupted' in capsys.readouterr().err
    assert output.read_bytes() == b'an earlier export'
    assert sorted(path.name for path in tmp_path.iterdir()) == ['model.onnx']


def test_the_default_output_lies_beside_the_model_where_onnxruntime_serves_it(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was written into the current folder, where the backend never looked: the server then
    # exported the network in memory without a word.
    from iknet_core.solvers.network import NetworkProposer

    mine = tmp_path / 'arm' / 'mine.pt'
    mine.parent.mkdir()
    mine.write_bytes(model_path.read_bytes())
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(['--model', str(mine), '--check-samples', '10']) == 0
    assert main(['--model', str(mine), '--check-samples', '10', '--fp16']) == 0
    assert sorted(p.name for p in mine.parent.iterdir()) == [
        'mine.fp16.onnx',
        'mine.onnx',
        'mine.pt',
    ]
    assert not any(elsewhere.iterdir())
    served = NetworkProposer(mine, backend='onnxruntime').describe()
    assert f'(the graph {mine.with_suffix(".onnx")})' in served
    mine.with_suffix('.onnx').unlink()
    assert '(exported in memory)' in NetworkProposer(mine, backend='onnxruntime').describe()


def test_the_fp16_graph_is_checked_against_the_float32_network(
    model_path: Path, tmp_path: Path
) -> None:
    # It was checked against torch's own fp16 network: the figure said how two half-precision
    # runtimes differ, not what half precision costs.
    output, differences, _ = export(model_path, tmp_path / 'h.onnx', fp16=True, check_samples=50)
    poses = torch.as_tensor(synthetic_samples(OMX_CHAIN, 50, 0)[0], dtype=torch.float32)
    session = onnxruntime.InferenceSession(str(output), providers=['CPUExecutionProvider'])
    (half,) = session.run(None, {'poses': poses.numpy()})
    with torch.inference_mode():
        full = load_checkpoint(model_path).model(poses).numpy()
    cost = np.abs(wrapped_difference(half.astype(np.float64), full)).max()
    assert differences['rad'] == pytest.approx(cost, rel=1e-6)
    assert cost > 1e-5  # half precision does move the angles
