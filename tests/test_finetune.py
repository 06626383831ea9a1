"""Fine-tuning to an arm that deviates: --init-from, and the study that measures it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import pytorch_pfn_extras as ppe
import torch

from iknet_core.checkpoint import load_checkpoint, save_checkpoint
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.kinematics.urdf import chain_to_urdf
from iknet_core.networks import build_model, joint_arcs, joint_ranges
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_core.solvers.policy import joint_bounds
from iknet_train.finetune_study import main as study_main
from iknet_train.finetune_study import perturbed_chain
from iknet_train.train import build_parser, train
from iknet_train.train import main as train_main


def test_perturbed_links_change_within_the_scale_and_nothing_else():
    arm_b = perturbed_chain(OMX_CHAIN, 0.2, seed=3)
    for a, b in zip(OMX_CHAIN.joints, arm_b.joints, strict=True):
        assert (a.name, a.axis, a.limits, a.reach) == (b.name, b.axis, b.limits, b.reach)
        ratio = np.linalg.norm(b.origin_xyz) / max(np.linalg.norm(a.origin_xyz), 1e-12)
        assert np.linalg.norm(a.origin_xyz) == 0 or 0.8 <= ratio <= 1.2
    assert arm_b != OMX_CHAIN and arm_b.name == f'{OMX_CHAIN.name}_perturbed'


def test_a_fine_tune_on_a_perturbed_arm_lowers_its_error(tmp_path: Path, capsys) -> None:
    out = tmp_path / 'study'
    argv = ['--base-model', str(shipped(DEFAULT_MODEL)), '--counts', '1000', '--reference', '2000',
            '--test-poses', '300', '--train-flags', '--epochs 15', '--out', str(out)]  # fmt: skip
    assert study_main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        "A's model fine-tuned on 1,000 samples" in printed and 'fine-tuned / reference' in printed
    )
    results = json.loads((out / 'study.json').read_text())
    assert results['fine_tuned']['1000']['median'] < 0.8 * results['a_unchanged']['median']
    assert (out / 'study.png').is_file()
    tuned = load_checkpoint(out / 'fine_tuned_1000.pt')
    assert tuned.chain.name == f'{OMX_CHAIN.name}_perturbed'
    assert tuned.training['init_from'] == str(shipped(DEFAULT_MODEL))


@pytest.mark.parametrize(
    ('flags', 'refusal'),
    [
        # The study's own sample counts and seeds, which its report names: refused, not dropped.
        (['--train-flags', '--synthetic 2000'], '--train-flags sets --synthetic, which the study'),
        (['--train-flags', '--see 3'], '--train-flags sets --seed'),  # argparse's abbreviation
        # A's model must be of the arm asked for (another arm's, here the SO-101's).
        (['--chain', 'so101'], 'was trained for chain'),
    ],
)
def test_the_study_refuses_flags_and_models_that_would_make_its_report_wrong(
    tmp_path: Path, capsys, flags: list[str], refusal: str
) -> None:
    out = tmp_path / 'study'
    argv = ['--base-model', str(shipped(DEFAULT_MODEL)), '--counts', '100', '--out', str(out)]
    assert study_main([*argv, *flags]) == 1
    assert refusal in capsys.readouterr().err
    assert not out.exists()  # refused before any run


def test_a_fine_tune_refuses_what_would_change_the_architecture(tmp_path: Path, capsys) -> None:
    base = str(shipped(DEFAULT_MODEL))
    common = ['--init-from', base, '--data', '--synthetic', '100', '--save-model',
              str(tmp_path / 'm.pt'), '--out', str(tmp_path)]  # fmt: skip
    assert train_main([*common, '--model-config', '{"width": 16}']) == 1
    assert '--model-config cannot change the architecture' in capsys.readouterr().err
    # Another joint count: the OM-X without its wrist, written as a URDF by the chain tool.
    three = replace(OMX_CHAIN, joints=OMX_CHAIN.joints[:3], tip_frame='link4')
    urdf = tmp_path / 'three.urdf'
    urdf.write_text(chain_to_urdf(three))
    assert train_main([*common, '--urdf', str(urdf), '--base', 'world', '--tip', 'link4']) == 1
    assert 'a fine-tune needs the same joint count' in capsys.readouterr().err
    # Its own base as --save-model: refused before a byte is written over it.
    copy = tmp_path / 'base.pt'
    copy.write_bytes(shipped(DEFAULT_MODEL).read_bytes())
    own = ['--init-from', str(copy), '--data', '--synthetic', '100', '--out', str(tmp_path)]
    assert train_main([*own, '--save-model', str(copy)]) == 1
    assert 'is the --init-from model' in capsys.readouterr().err
    assert copy.read_bytes() == shipped(DEFAULT_MODEL).read_bytes()


@pytest.mark.filterwarnings('ignore:val/loss is not in observation')
def test_a_stopped_fine_tune_resumes_with_the_flags_it_was_started_with(tmp_path: Path) -> None:
    model = build_model('iknet', {'width': 16, 'n_blocks': 1})
    base = save_checkpoint(tmp_path / 'base.pt', model, 'iknet', OMX_CHAIN)

    def fine_tune(out: str, epochs: str, *extra: str) -> Path:
        argv = ['--init-from', str(base), '--data', '--synthetic', '400', '--schedule', 'constant',
                '--epochs', epochs, '--no-progress', '--save-model', str(tmp_path / f'{out}.pt'),
                '--out', str(tmp_path / out), *extra]  # fmt: skip
        assert train_main(argv) == 0
        return tmp_path / f'{out}.pt'

    straight = load_checkpoint(fine_tune('straight', '3'))
    fine_tune('stopped', '2')
    resumed = load_checkpoint(
        fine_tune('resumed', '3', '--resume', str(tmp_path / 'stopped' / 'snapshot'))
    )
    assert resumed.training['epochs_run'] == 3 and resumed.training['init_from'] == str(base)
    for name, weight in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], weight)


def test_a_fine_tune_refuses_data_beyond_the_base_models_arcs(tmp_path: Path, capsys) -> None:
    narrow = joint_arcs([-3.2, -0.5, -0.5, -0.5], [3.2, 0.5, 0.5, 0.5])  # joint1: whole circle
    base = save_checkpoint(
        tmp_path / 'narrow.pt', build_model('iknet', {'width': 16, **narrow}), 'iknet', OMX_CHAIN
    )
    argv = ['--init-from', str(base), '--data', '--synthetic', '200', '--save-model',
            str(tmp_path / 'm.pt'), '--out', str(tmp_path)]  # fmt: skip
    assert train_main(argv) == 1
    error = capsys.readouterr().err
    assert 'a model of open_manipulator_x) answers only within its output ranges' in error
    assert "goes beyond them at ['joint2', 'joint3', 'joint4']" in error


def test_a_fine_tune_refuses_data_beyond_the_base_mixture_models_ranges(
    tmp_path: Path, capsys
) -> None:
    # A mixture model's component means stay on its joint ranges: fine-tuned on an arm whose
    # joints turn elsewhere (another side's arm), it learned that arm poorly, and said nothing.
    ranges = joint_ranges([-3.4, -0.5, -3.4, -3.4], [3.4, 0.5, 3.4, 3.4])
    model = build_model('mixture', {'width': 16, 'head_width': 8, **ranges}, OMX_CHAIN)
    base = save_checkpoint(tmp_path / 'narrow.pt', model, 'mixture', OMX_CHAIN)
    argv = ['--init-from', str(base), '--data', '--synthetic', '200', '--save-model',
            str(tmp_path / 'm.pt'), '--out', str(tmp_path)]  # fmt: skip
    assert train_main(argv) == 1
    error = capsys.readouterr().err
    assert "goes beyond them at ['joint2']" in error
    assert 'half ranges [3.4, 0.5, 3.4, 3.4] rad' in error
    assert not (tmp_path / 'm.pt').exists()


def test_a_fine_tuned_mixture_model_takes_its_frames_from_the_arm_it_trains_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A mixture model's local frames are FK of its chain: fine-tuned on arm B, it must compute
    # them on B while it trains, not on the arm A it came from.
    config = {'n_joints': 4, 'width': 16, 'n_blocks': 1, 'head_width': 16}
    config |= joint_ranges(*joint_bounds(OMX_CHAIN, 'reach'))  # as iknet-train sets them
    base = save_checkpoint(
        tmp_path / 'a.pt', build_model('mixture', config, OMX_CHAIN), 'mixture', OMX_CHAIN
    )
    arm_b = perturbed_chain(OMX_CHAIN, 0.2, seed=1)
    urdf = tmp_path / 'b.urdf'
    urdf.write_text(chain_to_urdf(arm_b))
    seen: list = []

    @ppe.training.extension.make_extension(trigger=(1, 'iteration'))
    def record_chain(manager) -> None:
        seen.append(manager.models['main'].chain)

    argv = ['--init-from', str(base), '--urdf', str(urdf), '--base', 'world', '--tip',
            'end_effector_link', '--data', '--synthetic', '300', '--epochs', '1', '--no-progress',
            '--save-model', str(tmp_path / 'b.pt'), '--out', str(tmp_path / 'run')]  # fmt: skip
    train(build_parser().parse_args(argv), extra_extensions=[record_chain])
    assert seen and all(chain == arm_b for chain in seen)
    # Its output ranges stay the base's, which a user is told.
    assert "its output ranges stay the base's" in caplog.text
    assert load_checkpoint(tmp_path / 'b.pt').model.chain == arm_b


def test_a_fine_tune_on_recordings_trains_on_the_arm_they_were_made_for(tmp_path: Path) -> None:
    """Recordings carry their arm (the recorder's metadata.json): --init-from and --data alone
    fine-tune on it, not on the base model's (which would refuse them as another arm's)."""
    from iknet_core.csv_schema import METADATA_FILE
    from iknet_train.synthetic import limit_ranges, sample_joints, write_recording

    base = save_checkpoint(
        tmp_path / 'a.pt', build_model('iknet', {'width': 16}, OMX_CHAIN), 'iknet', OMX_CHAIN
    )
    arm_b = perturbed_chain(OMX_CHAIN, 0.2, seed=1)
    joints = sample_joints(300, limit_ranges(arm_b), np.random.default_rng(0))
    folder = tmp_path / 'recordings' / 'b'
    write_recording(folder, 10**9 + 10**7 * np.arange(300), joints, arm_b)
    metadata = {'status': 'complete', 'chain': arm_b.to_dict()}
    (folder / METADATA_FILE).write_text(json.dumps(metadata))
    argv = ['--init-from', str(base), '--data', str(tmp_path / 'recordings'), '--synthetic',
            '200', '--epochs', '1', '--no-progress', '--save-model', str(tmp_path / 'b.pt'),
            '--out', str(tmp_path / 'run')]  # fmt: skip
    assert train_main(argv) == 0
    assert load_checkpoint(tmp_path / 'b.pt').chain == arm_b
    # Recordings of two arms name neither: the flags must.
    other = tmp_path / 'recordings' / 'c'
    write_recording(other, 10**9 + 10**7 * np.arange(300), joints, OMX_CHAIN)
    (other / METADATA_FILE).write_text(json.dumps({**metadata, 'chain': OMX_CHAIN.to_dict()}))
    with pytest.raises(ValueError, match='the recordings were made for different arms'):
        train(build_parser().parse_args(argv))
