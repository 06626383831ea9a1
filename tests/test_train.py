"""Training: a short run lowers the loss and writes a loadable model; snapshots resume."""

from __future__ import annotations

import json
import logging
import math
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from iknet_core.checkpoint import load_checkpoint
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics, pose_from_joints
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.networks import build_model
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_core.solvers.policy import joint_bounds
from iknet_train.losses import LOSSES, multi_hypothesis_loss
from iknet_train.schedules import adopt_kernels, one_cycle
from iknet_train.synthetic import synthetic_samples, write_recording
from iknet_train.time_budget import epochs_that_fit
from iknet_train.train import build_parser, main

SMALL = '{"width": 32, "n_blocks": 1}'


@pytest.fixture(scope='module')
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 s of a 100 Hz recording whose joints wander like a hand-guided arm."""
    directory = tmp_path_factory.mktemp('recording')
    rng = np.random.default_rng(0)
    steps = rng.normal(scale=0.01, size=(2000, 4))
    joints = np.clip(np.cumsum(steps, 0), -1.2, 1.2)[:2000]
    stamps = 10**18 + 10_000_000 * np.arange(2000)
    write_recording(directory, stamps, joints, OMX_CHAIN, {'gripper': 0.0})
    return directory


def train(recording: Path, out: Path, *extra: str) -> int:
    return main(
        [
            '--data', str(recording), '--synthetic', '2000', '--batch-size', '256',
            '--val-block-s', '2', '--no-progress',
            '--save-model', str(out / 'model.pt'), '--out', str(out), *extra,
        ]
    )  # fmt: skip


def log(out: Path) -> list[dict]:
    return json.loads((out / 'log').read_text())


@pytest.mark.parametrize('model_type', ['iknet', 'reference'])
def test_short_run_lowers_the_loss_and_writes_a_loadable_model(
    recording: Path,
    tmp_path: Path,
    model_type: str,
    capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger='iknet_train.train')
    extra = ['--model', model_type, '--epochs', '4', '--model-config', SMALL]
    if model_type == 'reference':
        extra = ['--model', 'reference', '--epochs', '6', '--patience', '10']
    assert train(recording, tmp_path, *extra) == 0
    printed = capsys.readouterr().out
    assert 'val/loss' in printed and '\033' not in printed, 'a log without terminal codes'

    entries = log(tmp_path)
    assert entries[-1]['val/loss'] < entries[0]['val/loss']
    assert (tmp_path / 'loss.png').is_file() and (tmp_path / 'snapshot').is_file()
    checkpoint = load_checkpoint(tmp_path / 'model.pt')
    assert checkpoint.model_type == model_type
    data = checkpoint.training['data']
    assert data['recorded_train'] > 0 and data['recorded_val'] > 0
    assert data['synthetic_train'] + data['synthetic_val'] == 2000
    assert checkpoint.training['command'].startswith('iknet-train --data')
    # The last line says which epoch's weights were kept, by its loss and in mm.
    kept = min(entries, key=lambda entry: entry['val/loss'])
    assert checkpoint.training['best_epoch'] == kept['epoch']
    said = f'kept epoch {kept["epoch"]}: val loss {kept["val/loss"]:.3g}, '
    assert said + f'{kept["val/position_mm"]:.3g} mm)' in caplog.text, caplog.text
    if model_type == 'iknet':  # every hypothesis stays inside the joints' reach
        low, high = joint_bounds(OMX_CHAIN, 'reach')
        centers = np.array(checkpoint.model.config.joint_centers)
        half_ranges = np.array(checkpoint.model.config.joint_half_ranges)
        limited = high - low < 2 * math.pi
        assert np.allclose((centers - half_ranges)[limited], low[limited])
        assert np.allclose((centers + half_ranges)[limited], high[limited])
        assert np.allclose(half_ranges[~limited], math.pi)


def test_recorded_turns_of_a_whole_turn_joint_are_taken_back_into_its_reach(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # joint1 of the OM-X turns whole turns (reach -pi to 3.3 rad); a recording that counts its
    # turns goes on past 3.3. The model learns the same arm inside the reach: a mixture
    # model's joint1 range stays the reach instead of widening to the recorded turns.
    rng = np.random.default_rng(1)
    joints = rng.uniform(-0.5, 0.5, (600, 4))
    joints[:, 0] = np.linspace(2.9, 4.2, 600)
    write_recording(tmp_path / 'turning', 10**18 + 10_000_000 * np.arange(600), joints, OMX_CHAIN)
    argv = ['--model', 'mixture', '--data', str(tmp_path / 'turning'), '--synthetic', '0',
            '--epochs', '1', '--val-block-s', '0.5', '--no-progress', '--model-config',
            '{"width": 16, "head_width": 16, "n_blocks": 1}', '--save-model',
            str(tmp_path / 'm.pt'), '--out', str(tmp_path / 'run')]  # fmt: skip
    with caplog.at_level(logging.INFO, logger='iknet_train.data'):
        assert main(argv) == 0
    assert 'took 415 joint states whole turns back into the reach' in caplog.text
    config = load_checkpoint(tmp_path / 'm.pt').model.config
    low, high = joint_bounds(OMX_CHAIN, 'reach')
    top = config.joint_centers[0] + config.joint_half_ranges[0]
    bottom = config.joint_centers[0] - config.joint_half_ranges[0]
    assert top == pytest.approx(high[0]) and bottom == pytest.approx(low[0])


# A resumed run starts on an epoch boundary, before any validation has reported.
@pytest.mark.filterwarnings('ignore:val/loss is not in observation')
def test_resume_continues_where_the_snapshot_left_off(recording: Path, tmp_path: Path) -> None:
    flags = ('--schedule', 'constant', '--lr', '0.003', '--model-config', SMALL)
    straight, interrupted = tmp_path / 'straight', tmp_path / 'interrupted'
    assert train(recording, straight, '--epochs', '3', *flags) == 0
    assert train(recording, interrupted, '--epochs', '2', *flags) == 0

    resumed = tmp_path / 'resumed'
    assert train(recording, resumed, '--epochs', '3', '--resume', str(interrupted / 'snapshot'),
                 *flags) == 0  # fmt: skip

    assert [e['epoch'] for e in log(resumed)] == [1, 2, 3]
    assert log(resumed)[-1]['val/loss'] == pytest.approx(log(straight)[-1]['val/loss'], rel=1e-4)
    training = load_checkpoint(resumed / 'model.pt').training
    assert training['epochs_run'] == 3
    # How the model came about: the first run's command, then the resume's, and the time of
    # both (the first's up to its snapshot).
    first = load_checkpoint(interrupted / 'model.pt').training
    assert first['commands'] == [first['command']]
    assert training['commands'] == [first['command'], training['command']]
    assert '--resume' in training['command'] and '--resume' not in first['command']
    assert training['wall_time_s'] > first['wall_time_s']


def test_bf16_mixed_precision_trains_on_the_cpu(recording: Path, tmp_path: Path) -> None:
    flags = ('--epochs', '3', '--model-config', SMALL, '--device', 'cpu', '--amp', 'bf16')
    assert train(recording, tmp_path, *flags) == 0
    entries = log(tmp_path)
    assert entries[-1]['val/loss'] < entries[0]['val/loss']
    checkpoint = load_checkpoint(tmp_path / 'model.pt')
    assert checkpoint.training['amp'] == 'bf16'
    assert next(checkpoint.model.parameters()).dtype == torch.float32  # weights stay float32


def test_fp16_without_cuda_is_refused(recording: Path, tmp_path: Path, capsys) -> None:
    assert train(recording, tmp_path, '--device', 'cpu', '--amp', 'fp16') == 1
    assert '--amp fp16 needs CUDA' in capsys.readouterr().err
    assert not (tmp_path / 'model.pt').exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='no CUDA device on this machine')
def test_fp16_training_and_the_cuda_backend_on_a_gpu(recording: Path, tmp_path: Path) -> None:
    from iknet_core.solvers.network import NetworkProposer

    flags = ('--epochs', '3', '--model-config', SMALL, '--device', 'cuda', '--amp', 'fp16')
    assert train(recording, tmp_path, *flags) == 0
    entries = log(tmp_path)
    assert entries[-1]['val/loss'] < entries[0]['val/loss']
    assert load_checkpoint(tmp_path / 'model.pt').training['device'].startswith('cuda')
    position, rotation = forward_kinematics(
        OMX_CHAIN, np.random.default_rng(5).uniform(-1, 1, (64, 4))
    )
    on_gpu = NetworkProposer(tmp_path / 'model.pt', 'cuda', 'torch')(position, rotation)
    on_cpu = NetworkProposer(tmp_path / 'model.pt', 'cpu', 'torch')(position, rotation)
    difference = np.angle(np.exp(1j * (on_gpu - on_cpu)))
    assert np.abs(difference).max() < 1e-3


def test_bad_flags_fail_with_a_message(recording: Path, tmp_path: Path, capsys) -> None:
    model, text = str(shipped(DEFAULT_MODEL)), tmp_path / 'notes.txt'
    text.write_text('not a snapshot\n')
    assert main(['--kinematics-pose-csv', 'a.csv', '--save-model', str(tmp_path / 'm.pt')]) == 1
    assert 'give them in pairs' in capsys.readouterr().err
    assert train(tmp_path / 'missing', tmp_path) == 1
    assert 'missing: no such recording directory' in capsys.readouterr().err
    for flags, message in (
        (('--epochs', '0'), '--epochs must be at least 1, got 0'),
        (('--batch-size', '0'), '--batch-size must be at least 1, got 0'),
        (('--lr', '-1'), '--lr must be > 0'),
        (('--train-val-ratio', '1'), '--train-val-ratio must be between 0 and 1'),
        (('--model-config', 'width=8'), '--model-config is not JSON'),
        (('--model-config', '[8]'), '--model-config must be a JSON object'),
        (('--resume', str(tmp_path / 'nothing')), 'no snapshot at'),
        (('--max-time', '0'), '--max-time must be a number of minutes > 0, got 0.0'),
        (('--max-time', 'inf'), '--max-time must be a number of minutes > 0, got inf'),
        (('--max-time', '5', '--resume', str(tmp_path / 'snapshot')), 'start a new one with'),
        (('--sample-fk-weight', '-1'), '--sample-fk-weight must be a finite number >= 0, got -1'),
        (('--sample-fk-weight', '5'), 'this run trains an iknet model'),
        (('--val-block-s', '0'), '--val-block-s must be a number of seconds > 0, got 0.0'),
        (('--resume', model), f'--resume {model} is a model checkpoint (--save-model), not a'),
        (('--resume', str(text)), f'--resume {text} is not a file torch can read'),
        (('--init-from', model, '--model', 'mixture'), 'holds a model of type iknet, and a fine'),
    ):
        assert train(recording, tmp_path / 'bad', *flags) == 1, flags
        assert message in capsys.readouterr().err, flags
    assert not (tmp_path / 'bad').exists(), 'refused before anything is written'


def test_a_run_ended_by_sigterm_says_how_to_carry_it_on(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / 'run'
    command = [sys.executable, '-m', 'iknet_train.train', '--data', str(recording),
               '--synthetic', '2000', '--epochs', '1000', '--model-config', SMALL, '--no-progress',
               '--save-model', str(out / 'model.pt'), '--out', str(out)]  # fmt: skip
    quiet, caught = subprocess.DEVNULL, subprocess.PIPE
    process = subprocess.Popen(command, stdout=quiet, stderr=caught, text=True)
    try:
        deadline = time.monotonic() + 300.0  # a cold start imports torch and compiles kernels
        while not (out / 'snapshot').exists() and process.poll() is None:
            assert time.monotonic() < deadline, 'no snapshot after 300 s'
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, errors
    assert f'same flags and --resume {out / "snapshot"}' in errors and 'Traceback' not in errors
    assert not (out / 'model.pt').exists() and not list(out.glob('tmp_*'))
    # Signalled as its first snapshot appeared: the record that keeps it from the next run in
    # --out is there already (it came after the epoch's plot and log).
    assert json.loads((out / 'snapshot.json').read_text())['finished'] is False


def test_an_interrupted_run_names_what_carries_it_on_and_removes_only_its_own_files(
    tmp_path: Path,
) -> None:
    import argparse

    from iknet_train.train import interrupted

    out = tmp_path / 'run'
    out.mkdir()
    (out / 'snapshot').write_bytes(b'an older run')
    for name in ('tmp_loss.png', 'tmp_snapshot', 'tmp_notes.csv', '.model.pt.partial'):
        (out / name).write_text('')
    started = time.time() + 1.0  # the snapshot was written before this run started
    args = argparse.Namespace(out=out, save_model=out / 'model.pt', resume=None, max_time=None)
    # Stopped before it took the folder (out_held): the files there may be another live run's.
    before = sorted(path.name for path in out.iterdir())
    args.out_held = False
    assert 'before its first epoch ended' in interrupted(args, time.time() - 60.0)
    assert sorted(path.name for path in out.iterdir()) == before
    args.out_held = True
    assert 'before its first epoch ended; nothing was saved' in interrupted(args, started)
    assert sorted(path.name for path in out.iterdir()) == ['snapshot', 'tmp_notes.csv']
    args.resume = tmp_path / 'earlier' / 'snapshot'  # a resumed run: its snapshot carries it on
    assert f'--resume {args.resume}' in interrupted(args, started)
    assert f'with the same flags and --resume {out / "snapshot"}' in interrupted(
        args, time.time() - 60.0
    )
    # Given its command line, the whole command to carry it on, its own --resume replaced.
    argv = ['--data', 'a b', '--resume', str(args.resume), '--epochs', '9']
    command = shlex.join(['iknet-train', '--data', 'a b', '--epochs', '9', '--resume'])
    advice = interrupted(args, time.time() - 60.0, argv)
    assert advice.endswith(f': {command} {out / "snapshot"}'), advice
    # A run fitted to --max-time resumes with the epochs that fit: --resume refuses --max-time.
    args.max_time = 10.0
    advice = interrupted(args, time.time() - 60.0)
    assert (
        '--epochs N instead of --max-time' in advice and f'--resume {out / "snapshot"}' in advice
    )


def test_outputs_that_could_not_be_written_are_refused_before_the_run(tmp_path, capsys) -> None:
    (tmp_path / 'file').write_text('')
    for flags, message in (
        (('--save-model', str(tmp_path)), 'is a directory; give a file name'),
        (('--save-model', str(tmp_path / 'file' / 'm.pt')), 'file is a file, not a folder'),
        (('--out', str(tmp_path / 'file')), 'file is a file, not a folder'),
    ):
        with pytest.raises(SystemExit) as stopped:
            main([*flags, '--data'])
        assert stopped.value.code == 2, flags
        assert message in capsys.readouterr().err, flags


# Batch 256: ~12 iterations an epoch, timed whole; batch 64: ~50, timed in its middle.
@pytest.mark.parametrize('batch_size', ['256', '64'])
def test_max_time_fits_the_epochs_and_the_schedule_to_the_time(
    recording: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, batch_size: str
) -> None:
    caplog.set_level(logging.INFO)
    flags = ('--epochs', '100000', '--max-time', '0.15', '--model-config', SMALL, '--lr', '0.01')
    assert train(recording, tmp_path, *flags, '--batch-size', batch_size) == 0
    assert 'of at most 100000 epochs fit' in caplog.text
    training = load_checkpoint(tmp_path / 'model.pt').training
    assert training['max_time_min'] == 0.15
    assert 1 <= training['epochs_run'] <= training['planned_epochs'] < 100000
    entries = log(tmp_path)
    assert len(entries) == training['epochs_run']
    if training['epochs_run'] == training['planned_epochs']:  # not cut short by a busy machine
        assert entries[-1]['lr'] < 1e-4, 'the one cycle ends with the epochs that fit'


def test_a_resized_one_cycle_carries_on_where_the_first_was() -> None:
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=0.01)
    first = one_cycle(optimizer, 0.01, 1000)
    for _ in range(300):
        optimizer.step()
        first.step()
    before = optimizer.param_groups[0]['lr']
    one_cycle(optimizer, 0.01, 1000, done=300)
    assert optimizer.param_groups[0]['lr'] == pytest.approx(before)
    shorter = one_cycle(optimizer, 0.01, 400, done=300)
    for _ in range(100):
        optimizer.step()
        shorter.step()
    assert optimizer.param_groups[0]['lr'] < 1e-5, 'annealed at the new end'


@pytest.mark.parametrize('fused_before', [True, False])
def test_a_resumed_optimizer_keeps_the_kernels_chosen_where_it_resumes(fused_before: bool) -> None:
    # A run started on a GPU (fused Adam) resumed where torch has no fused kernel, and back.
    layer = torch.nn.Linear(3, 2)
    layer(torch.ones(1, 3)).sum().backward()
    before = torch.optim.Adam(layer.parameters(), lr=0.01, fused=fused_before)
    before.step()
    here = torch.optim.Adam(layer.parameters(), lr=0.01, fused=not fused_before)
    state = before.state_dict()
    adopt_kernels(state, here)
    here.load_state_dict(state)
    assert [group['fused'] for group in here.param_groups] == [not fused_before]
    assert all(int(moments['step']) == 1 for moments in here.state.values()), (
        'moments carried over'
    )
    here.step()


def test_epochs_that_fit_the_time_left() -> None:
    # 100 s left, 10 s of the first epoch to go, 20 s an epoch: 90 % of the time planned.
    assert epochs_that_fit(100.0, 10.0, 20.0, most=50) == 1 + 4
    assert epochs_that_fit(100.0, 10.0, 20.0, most=3) == 3
    assert epochs_that_fit(5.0, 10.0, 20.0, most=50) == 1, 'the first epoch always ends'


def test_a_budget_shorter_than_one_epoch_says_how_far_the_first_runs_past_it() -> None:
    import time

    from iknet_train.time_budget import TimeBudget

    # An epoch of 1,000 iterations, 0.1 s each as timed, and 0.5 s of budget: about 100 s past.
    budget = TimeBudget(0.5, time.monotonic(), torch.device('cpu'), 1_000, lambda: None)
    assert budget.iteration_done(budget.first, most_epochs=10) is None
    assert budget.overrun_s() == 0.0  # not timed yet
    budget.clock -= 0.1 * (budget.last - budget.first)
    assert budget.iteration_done(budget.last, most_epochs=10) == 1
    assert 90.0 < budget.overrun_s() < 100.0


def test_short_runs_train_on_a_one_cycle_schedule(recording: Path, tmp_path: Path) -> None:
    # One iteration in all: no schedule to warm up in, the rate stays at its peak.
    one = tmp_path / 'one'
    assert train(recording, one, '--epochs', '1', '--batch-size', '100000') == 0
    data = load_checkpoint(one / 'model.pt').training['data']
    count = data['recorded_train'] + data['synthetic_train']
    # 2 epochs of 10 iterations: a warm-up of 5 % is one step, which OneCycleLR divides by zero
    # on; the warm-up is two steps instead.
    batch_size = next(size for size in range(count // 11, count // 9 + 2) if count // size == 10)
    short = tmp_path / 'short'
    flags = ('--epochs', '2', '--batch-size', str(batch_size), '--model-config', SMALL)
    assert train(recording, short, *flags) == 0
    assert [entry['iteration'] for entry in log(short)] == [10, 20]


@pytest.mark.parametrize(
    ('flags', 'said'),
    [
        # Another run length: the snapshot's one-cycle schedule has a fixed length.
        (('--epochs', '4', '--model-config', SMALL),
         ('--resume carries a run on with the flags it was started with', '--init-from')),
        # Another architecture, another rate, another seed: named from the run's record.
        (('--epochs', '2', '--model-config', '{"width": 16, "n_blocks": 1}'),
         ('was started with other flags', 'width: 32 then, 16 now')),
        (('--epochs', '2', '--model-config', SMALL, '--lr', '0.5'),
         ('was started with other flags', 'lr: 0.005 then, 0.5 now')),
        (('--epochs', '2', '--model-config', SMALL, '--seed', '7'),
         ('was started with other flags', 'seed: 0 then, 7 now')),
    ],
)  # fmt: skip
def test_resume_refuses_flags_that_do_not_carry_the_run_on(
    recording: Path, tmp_path: Path, capsys, flags: tuple[str, ...], said: tuple[str, ...]
) -> None:
    assert train(recording, tmp_path / 'run', '--epochs', '2', '--model-config', SMALL) == 0
    snapshot = str(tmp_path / 'run' / 'snapshot')
    assert train(recording, tmp_path / 'on', '--resume', snapshot, *flags) == 1
    error = capsys.readouterr().err
    assert all(words in error for words in said), error


def test_resume_refuses_a_snapshot_of_another_arm(tmp_path: Path) -> None:
    from iknet_train.run_record import check_resumed_run, run_record, write_run_record

    settings = {'lr': 0.005, 'batch_size': 256, 'epochs': 2}
    flags = vars(build_parser().parse_args([]))
    started = run_record(OMX_CHAIN.to_dict(), 'iknet', {}, settings, flags)
    other = replace(OMX_CHAIN, name='other_arm')
    snapshot = tmp_path / 'snapshot'
    write_run_record(snapshot, started, finished=False)
    check_resumed_run(snapshot, started)  # the same run: carried on
    check_resumed_run(
        snapshot, run_record(OMX_CHAIN.to_dict(), 'iknet', {}, {**settings, 'epochs': 3}, flags)
    )
    again = run_record(other.to_dict(), 'iknet', {}, settings, flags)
    with pytest.raises(ValueError, match=r"for arm 'open_manipulator_x'.* for 'other_arm'"):
        check_resumed_run(snapshot, again)
    longer = replace(OMX_CHAIN, tip_xyz=(0.2, 0.0, 0.0))
    again = run_record(longer.to_dict(), 'iknet', {}, settings, flags)
    with pytest.raises(ValueError, match='whose joints or links differ'):
        check_resumed_run(snapshot, again)


def test_a_new_run_keeps_a_stopped_runs_snapshot_aside_and_says_what_it_writes_over(
    recording: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert train(recording, tmp_path, '--epochs', '1', '--model-config', SMALL) == 0
    assert 'writes over' not in caplog.text
    record = tmp_path / 'snapshot.json'
    assert json.loads(record.read_text())['finished'] is True
    # As a run stopped after an epoch leaves it: its snapshot, and a record not finished.
    record.write_text(record.read_text().replace('"finished": true', '"finished": false'))
    stopped = (tmp_path / 'snapshot').read_bytes()
    assert train(recording, tmp_path, '--epochs', '1', '--model-config', SMALL, '--seed', '3') == 0
    (kept,) = tmp_path.glob('snapshot.unfinished-*[0-9]')
    assert kept.read_bytes() == stopped
    assert json.loads(Path(f'{kept}.json').read_text())['seed'] == 0
    # A finished run's snapshot is written over: its model was saved. What is written over is
    # said as the run starts.
    caplog.clear()
    assert train(recording, tmp_path, '--epochs', '1', '--model-config', SMALL) == 0
    assert len(list(tmp_path.glob('snapshot.unfinished-*[0-9]'))) == 1
    error = caplog.text
    assert f'--save-model {tmp_path / "model.pt"} exists (written ' in error, error
    assert f"--out {tmp_path} holds an earlier run's log and loss.png" in error, error
    # Not by a run into a folder of its own.
    caplog.clear()
    assert train(recording, tmp_path / 'new', '--epochs', '1', '--model-config', SMALL) == 0
    assert 'writes over' not in caplog.text


@pytest.mark.filterwarnings('ignore:val/loss is not in observation')
def test_a_snapshot_without_a_record_is_checked_by_its_model_and_a_wrong_try_costs_nothing(
    recording: Path, tmp_path: Path, capsys
) -> None:
    # As a run from before records left it.
    assert train(recording, tmp_path / 'run', '--epochs', '2', '--model-config', SMALL) == 0
    (tmp_path / 'run' / 'snapshot.json').unlink()
    snapshot = str(tmp_path / 'run' / 'snapshot')
    other = ('--epochs', '2', '--model-config', '{"width": 16, "n_blocks": 1}')
    assert train(recording, tmp_path / 'on', '--resume', snapshot, *other) == 1
    assert 'is a snapshot of another model than these flags build' in capsys.readouterr().err
    flags = ('--epochs', '2', '--model-config', SMALL)
    assert train(recording, tmp_path / 'on', '--resume', snapshot, *flags) == 0


def test_a_run_that_stops_before_its_first_snapshot_leaves_the_last_record(
    recording: Path, tmp_path: Path, monkeypatch
) -> None:
    assert train(recording, tmp_path, '--epochs', '1', '--model-config', SMALL) == 0
    before = (tmp_path / 'snapshot.json').read_text()

    def failing(*args, **kwargs):
        raise ValueError('stopped in the first epoch')

    monkeypatch.setitem(LOSSES, 'iknet', failing)
    assert train(recording, tmp_path, '--epochs', '1', '--model-config', SMALL, '--seed', '5') == 1
    # The record still describes the snapshot beside it: the finished run's, seed 0.
    assert (tmp_path / 'snapshot.json').read_text() == before
    assert not list(tmp_path.glob('snapshot.unfinished-*'))


def test_loss_does_not_care_which_2pi_copy_of_joint1_was_recorded() -> None:
    model = build_model('iknet', {'width': 16, 'n_blocks': 1})
    poses, joints = (
        torch.as_tensor(a, dtype=torch.float32) for a in synthetic_samples(OMX_CHAIN, 64)
    )
    shifted = joints.clone()
    shifted[:, 0] += torch.where(shifted[:, 0] < 0, 2 * math.pi, -2 * math.pi)

    loss, _ = multi_hypothesis_loss(model, OMX_CHAIN, poses, joints)
    loss_shifted, _ = multi_hypothesis_loss(model, OMX_CHAIN, poses, shifted)

    torch.testing.assert_close(loss, loss_shifted, atol=1e-5, rtol=1e-5)


def test_loss_lets_each_pose_pick_its_hypothesis() -> None:
    """Elbow up and elbow down both answer the pose: either recorded branch costs nothing."""
    model = build_model('iknet', {'width': 16, 'n_blocks': 1, 'n_hypotheses': 2})
    q = torch.tensor([[0.3, -0.6, 0.9, 0.4]], dtype=torch.float64)
    pose = pose_from_joints(OMX_CHAIN, q)
    position, rotation = forward_kinematics(OMX_CHAIN, q.numpy())
    branches = torch.as_tensor(OmxAnalyticIK().branches(position, rotation)[0])  # (2, 4)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.copy_(torch.stack([branches.cos(), branches.sin()], -1).flatten())

    for recorded in branches:
        loss, figures = multi_hypothesis_loss(
            model, OMX_CHAIN, pose.float(), recorded[None].float()
        )
        assert figures['position_mm'].item() < 1e-3
        assert loss.item() < 1e-6
    # One hypothesis alone must pay for the branch it does not cover.
    with torch.no_grad():
        model.head.bias.copy_(
            torch.stack([branches[[0, 0]].cos(), branches[[0, 0]].sin()], -1).flatten()
        )
    loss, _ = multi_hypothesis_loss(model, OMX_CHAIN, pose.float(), branches[1:].float())
    assert loss.item() > 1e-3


def test_a_signal_whose_interrupt_was_lost_still_stops_the_run(recording: Path, tmp_path: Path):
    """A KeyboardInterrupt raised inside a garbage-collector callback is dropped ('Exception
    ignored in ...'): the loop asks whether a signal came, and stops as Ctrl-C would."""
    from iknet_train.train import train as run_training

    args = build_parser().parse_args(
        ['--data', str(recording), '--synthetic', '2000', '--model-config', SMALL,
         '--no-progress', '--save-model', str(tmp_path / 'model.pt'), '--out', str(tmp_path)]
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run_training(args, signalled=lambda: True)
    assert not (tmp_path / 'model.pt').exists()


@pytest.mark.filterwarnings('ignore:val/loss is not in observation')
def test_early_stopping_is_carried_by_the_snapshot_and_a_run_it_ended_is_not_resumed(
    recording: Path, tmp_path: Path, capsys
) -> None:
    # A rate at which the validation loss rises: patience 1 ends the run at its second epoch.
    flags = ('--epochs', '20', '--patience', '1', '--lr', '5', '--schedule', 'constant',
             '--model-config', SMALL)  # fmt: skip
    out = tmp_path / 'run'
    assert train(recording, out, *flags) == 0
    record = json.loads((out / 'snapshot.json').read_text())
    assert record['finished'] and record['stopped_early_at'] == len(log(out)) < 20
    # The trigger's state travels with the snapshot: ppe's keeps none, and a resumed run
    # started its patience afresh.
    saved = torch.load(out / 'snapshot', weights_only=True)['extensions']['EarlyStopping']
    assert saved['extension']['count'] >= 1 and math.isfinite(saved['extension']['best'])
    model = (out / 'model.pt').read_bytes()
    assert train(recording, out, *flags, '--resume', str(out / 'snapshot')) == 1
    error = capsys.readouterr().err
    assert f'early stopping ended at epoch {record["stopped_early_at"]}' in error, error
    assert '--init-from the model it saved' in error
    assert (out / 'model.pt').read_bytes() == model  # not trained on, not written over


def test_a_snapshot_without_its_record_is_resumed_with_a_warning(
    recording: Path, tmp_path: Path, caplog
) -> None:
    assert train(recording, tmp_path / 'run', '--epochs', '1', '--model-config', SMALL) == 0
    moved = tmp_path / 'moved'
    moved.mkdir()
    (moved / 'snapshot').write_bytes((tmp_path / 'run' / 'snapshot').read_bytes())
    with caplog.at_level(logging.WARNING):
        argv = ('--epochs', '1', '--model-config', SMALL, '--resume', str(moved / 'snapshot'))
        assert train(recording, tmp_path / 'on', *argv) == 0
    assert 'has no run record beside it (snapshot.json): the flags' in caplog.text


def test_an_out_folder_another_run_is_writing_to_is_refused(recording: Path, tmp_path: Path):
    from iknet_train.run_record import out_folder_held

    out = tmp_path / 'busy'
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from pathlib import Path; '
         'from iknet_train.run_record import out_folder_held; '
         f'held = out_folder_held(Path({str(out)!r})); held.__enter__(); '
         'print("held", flush=True); sys.stdin.read()'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == 'held\n'
        refused = rf'another iknet-train run .*pid {holder.pid}\)'
        with pytest.raises(ValueError, match=refused), out_folder_held(out):
            pass
        # A run into it is refused before its data loads, and touches nothing there.
        before = sorted(path.name for path in out.iterdir())
        assert train(recording, out, '--epochs', '1', '--model-config', SMALL) == 1
        assert sorted(path.name for path in out.iterdir()) == before
    finally:
        holder.communicate('')  # its end lets the folder go
    with out_folder_held(out), out_folder_held(out):  # free again; this process's own runs too
        pass


@pytest.mark.filterwarnings('ignore:val/loss is not in observation')
def test_a_run_resumed_with_another_progress_flag_carries_on(recording: Path, tmp_path: Path):
    # Started with --no-progress, resumed without: the snapshot has no ProgressBar state, which
    # ppe's loading asked for (KeyError, a traceback).
    flags = ('--epochs', '2', '--model-config', SMALL)
    assert train(recording, tmp_path / 'run', *flags) == 0
    snapshot = tmp_path / 'run' / 'snapshot'
    argv = ['--data', str(recording), '--synthetic', '2000', '--batch-size', '256',
            '--val-block-s', '2', '--save-model', str(tmp_path / 'on.pt'), '--out',
            str(tmp_path / 'on'), *flags, '--resume', str(snapshot)]  # fmt: skip
    assert main(argv) == 0


def test_early_stopping_carries_its_check_window():
    # --check-epochs 3: a run resumed mid-window averaged only the epochs after the resume.
    from pytorch_pfn_extras.training import triggers

    from iknet_train.train import EarlyStopping

    def early() -> EarlyStopping:
        return EarlyStopping(triggers.EarlyStoppingTrigger(check_trigger=(3, 'epoch'), patience=2))

    before = early()
    before.stop._summary.add({'val/loss': 2.0})
    before.stop._summary.add({'val/loss': 4.0})
    before.stop.best, before.stop.count = 1.5, 1
    after = early()
    after.load_state_dict(before.state_dict())
    assert (after.stop.best, after.stop.count, after.fired) == (1.5, 1, False)
    assert after.stop._summary.compute_mean() == {'val/loss': 3.0}


def test_the_kept_epoch_and_the_run_history_say_what_they_do_not_know() -> None:
    from iknet_train.train import BestModel, RunHistory

    model = build_model('iknet', {'width': 8, 'n_blocks': 1})
    best = BestModel(model)
    assert best.describe() == "no finite validation loss: the last epoch's weights"
    # A snapshot from before the kept epoch was recorded.
    best.load_state_dict({'value': 0.5, 'state': model.state_dict()})
    assert best.describe() == 'kept an epoch before this resume: val loss 0.5'
    # A snapshot from before run histories: this run's own state is filled in for it.
    history = RunHistory('iknet-train --resume s', time.monotonic())
    history.load_state_dict(history.state_dict())
    assert history.commands == [None, 'iknet-train --resume s']
