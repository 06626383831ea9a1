"""The model file: one self-describing file, loaded without unpickling, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iknet_core.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.networks import build_model
from iknet_train.synthetic import synthetic_samples


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    model = build_model('iknet', {'width': 32, 'n_blocks': 1})
    poses = torch.as_tensor(synthetic_samples(OMX_CHAIN, 100)[0], dtype=torch.float32)
    model.fit_normalization(poses)
    return save_checkpoint(tmp_path / 'model.pt', model, 'iknet', OMX_CHAIN, {'note': 'test'})


def test_round_trip_rebuilds_model_chain_and_normalization(saved: Path) -> None:
    checkpoint = load_checkpoint(saved)
    raw = torch.load(saved, weights_only=True)

    assert checkpoint.model_type == 'iknet'
    assert checkpoint.chain == OMX_CHAIN
    assert checkpoint.joint_names == ['joint1', 'joint2', 'joint3', 'joint4']
    assert checkpoint.training == {'note': 'test'}
    assert not checkpoint.model.training
    assert raw['format_version'] == FORMAT_VERSION
    assert raw['model_config']['width'] == 32
    assert checkpoint.model.normalization() == raw['normalization']
    poses = torch.as_tensor(synthetic_samples(OMX_CHAIN, 8, seed=2)[0], dtype=torch.float32)
    rebuilt = build_model('iknet', raw['model_config'])
    rebuilt.load_state_dict(raw['state_dict'])
    rebuilt.set_normalization(raw['normalization'])
    torch.testing.assert_close(checkpoint.model(poses), rebuilt.eval()(poses))


def _rewrite(path: Path, **changes) -> None:
    content = torch.load(path, weights_only=True)
    content.update(changes)
    torch.save(content, path)


def test_corrupt_file_is_a_value_error_naming_it(saved: Path) -> None:
    saved.write_bytes(saved.read_bytes()[:200])
    with pytest.raises(ValueError, match=f'{saved}: not a readable iknet checkpoint \\(cut short'):
        load_checkpoint(saved)
    saved.write_bytes(b'<robot name="arm"/>')  # a URDF given as the model
    with pytest.raises(ValueError, match=f'{saved}: .*checkpoint \\(not a PyTorch file: it begin'):
        load_checkpoint(saved)
    saved.write_bytes(b'\x08\x08\x12\x07pytorch\x1a\x052.13')  # how iknet-export's graphs begin
    with pytest.raises(ValueError, match=r'an ONNX graph, .*give the \.pt checkpoint'):
        load_checkpoint(saved)


def test_foreign_torch_file_is_refused(saved: Path) -> None:
    torch.save({'fc.weight': torch.zeros(3, 3)}, saved)
    with pytest.raises(ValueError, match='not an iknet checkpoint'):
        load_checkpoint(saved)


def test_pickled_objects_are_never_unpickled(saved: Path) -> None:
    torch.save({'format': 'iknet-checkpoint', 'evil': Path('/')}, saved)
    with pytest.raises(ValueError, match='WeightsUnpickler error'):
        load_checkpoint(saved)


def test_mismatched_files_say_what_does_not_match(saved: Path) -> None:
    _rewrite(saved, format_version=FORMAT_VERSION + 1)
    with pytest.raises(ValueError, match=f'format version {FORMAT_VERSION + 1}'):
        load_checkpoint(saved)
    _rewrite(saved, format_version=FORMAT_VERSION, model_config={'width': 64, 'n_blocks': 1})
    with pytest.raises(ValueError, match=r'does not match its model.*size mismatch'):
        load_checkpoint(saved)
    _rewrite(saved, model_config={'width': 32, 'n_blocks': 1}, joint_names=['a', 'b', 'c', 'd'])
    with pytest.raises(ValueError, match=r"joint names \['a', 'b', 'c', 'd'\]"):
        load_checkpoint(saved)
    content = torch.load(saved, weights_only=True)
    del content['chain']
    torch.save(content, saved)
    with pytest.raises(ValueError, match=r"lacks \['chain'\]"):
        load_checkpoint(saved)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match='no model file'):
        load_checkpoint(tmp_path / 'none.pt')


def test_a_readme_model_path_typed_outside_the_checkout_is_pointed_to(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a pip user's folder: no models/ here
    with pytest.raises(
        FileNotFoundError, match=r'iknet ships models/omx_iknet\.pt at .*omx_iknet'
    ):
        load_checkpoint('models/omx_iknet.pt')
    with pytest.raises(FileNotFoundError, match=r'no model file at models/mine\.pt$'):
        load_checkpoint('models/mine.pt')
