"""iknet-tune: a study in SQLite, and two worker processes sharing one study in a real PostgreSQL
server that the test starts from Debian's packages (skipped, saying why, where it cannot)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from iknet_core.checkpoint import load_checkpoint
from iknet_train.tune import main

# Tiny runs: a trial is a few seconds whatever it draws.
TRAIN_FLAGS = ['--', '--data', '--synthetic', '600', '--epochs', '3']


def test_a_three_trial_study_in_sqlite_saves_the_best_model_and_plots(tmp_path: Path, capsys):
    storage = f'sqlite:///{tmp_path / "study.db"}'
    argv = ['--trials', '3', '--storage', storage, '--seed', '0', '--out', str(tmp_path / 'out'),
            '--save-model', str(tmp_path / 'best.pt'), *TRAIN_FLAGS]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    study = optuna.load_study(study_name='iknet', storage=storage)
    assert len(study.trials) == 3
    assert f'best trial {study.best_trial.number}' in printed
    best = load_checkpoint(tmp_path / 'best.pt')
    assert best.model.config.width == study.best_trial.params['width']
    assert (tmp_path / 'out' / 'history.png').is_file()
    assert (tmp_path / 'out' / 'importances.png').is_file()


def test_bad_train_flags_fail_before_any_trial(tmp_path: Path, capsys):
    storage = f'sqlite:///{tmp_path / "study.db"}'
    assert main(['--storage', storage, '--', '--no-such-flag']) != 0
    assert 'unrecognized arguments: --no-such-flag' in capsys.readouterr().err
    assert not (tmp_path / 'study.db').exists()


def test_train_flags_every_trial_refuses_fail_before_any_trial(tmp_path: Path, capsys):
    storage = f'sqlite:///{tmp_path / "study.db"}'
    argv = ['--trials', '3', '--storage', storage, '--out', str(tmp_path / 'out'), '--',
            '--epochs', '0']  # fmt: skip
    assert main(argv) == 1
    assert capsys.readouterr().err == 'iknet-tune: error: --epochs must be at least 1, got 0\n'
    assert not (tmp_path / 'study.db').exists()


def test_failed_trials_are_one_line_each_and_the_last_line_says_why(tmp_path: Path):
    # --amp fp16 on the CPU passes iknet-train's flag checks; each trial's training refuses it.
    command = [sys.executable, '-m', 'iknet_train.tune', '--trials', '2', '--storage',
               f'sqlite:///{tmp_path / "study.db"}', '--out', str(tmp_path / 'out'), '--',
               '--device', 'cpu', '--amp', 'fp16']  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert 'Traceback' not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        'iknet-tune: no trial completed; trial 0 failed: ValueError: --amp fp16'
    )


@pytest.mark.parametrize(
    ('storage', 'problem'),
    [
        # A URL that names no driver: whichever SQLAlchemy picks (psycopg2 or psycopg) is
        # hidden, so no connection is tried; then the README's.
        ('postgresql://user@dbhost/iknet', 'is not installed (pip install '),
        ('postgresql+psycopg2://user@dbhost/iknet', 'driver psycopg2 is not installed (pip '
         'install psycopg2-binary)'),
        ('bogus://x', "Can't load plugin: sqlalchemy.dialects:bogus"),
    ],
)  # fmt: skip
def test_a_storage_it_cannot_open_is_one_line_naming_it(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, storage: str, problem: str
):
    for driver in ('psycopg2', 'psycopg'):
        monkeypatch.setitem(sys.modules, driver, None)  # its import fails, as where not installed
    assert main(['--storage', storage, '--out', str(tmp_path / 'out')]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f'iknet-tune: error: --storage {storage}: ') and problem in error
    assert error.count('\n') == 1 and not (tmp_path / 'out').exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of its own on a Unix socket (no TCP listener), ended afterwards."""
    found = shutil.which('initdb') or next(
        iter(sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))), None
    )
    if found is None:
        pytest.skip('PostgreSQL is not installed (Debian: apt-get install postgresql)')
    pytest.importorskip('psycopg2', reason='no PostgreSQL driver (pip install psycopg2-binary)')
    bin_dir = Path(found).parent
    # initdb refuses root: run the server as Debian's postgres user, in a folder it owns.
    as_user = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    home = Path(tempfile.mkdtemp(prefix='iknet-pg-'))
    data = home / 'data'
    port = _free_port()
    try:
        if as_user:
            shutil.chown(home, 'postgres')
        subprocess.run(
            [*as_user, str(bin_dir / 'initdb'), '-D', str(data), '-U', 'iknet', '--auth=trust'],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        options = f"-p {port} -k {home} -c listen_addresses=''"
        start = [*as_user, str(bin_dir / 'pg_ctl'), '-D', str(data), '-o', options]
        # -w waits until the server accepts connections (deadline -t s), not a fixed sleep.
        subprocess.run([*start, '-w', '-t', '120', '-l', str(home / 'log'), 'start'],
                       check=True, capture_output=True, timeout=180)  # fmt: skip
    except (subprocess.SubprocessError, OSError, LookupError) as error:
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip(f'PostgreSQL did not start here: {error}')
    try:
        import psycopg2

        connection = psycopg2.connect(host=str(home), port=port, user='iknet', dbname='postgres')
        connection.autocommit = True
        connection.cursor().execute('CREATE DATABASE iknet_tune')
        connection.close()
        yield f'postgresql+psycopg2://iknet@/iknet_tune?host={home}&port={port}'
    finally:
        subprocess.run([*as_user, str(bin_dir / 'pg_ctl'), '-D', str(data), '-m', 'fast', 'stop'],
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)


def start_worker(storage: str, out: Path, seed: int) -> subprocess.Popen:
    command = [sys.executable, '-m', 'iknet_train.tune', '--trials', '2', '--storage', storage,
               '--study-name', 'shared', '--seed', str(seed), '--out', str(out),
               '--save-model', str(out / 'best.pt'), *TRAIN_FLAGS]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_workers_share_one_study_in_postgresql(postgres_url: str, tmp_path: Path):
    # Created once up front, as optuna's docs do before starting workers.
    optuna.create_study(study_name='shared', storage=postgres_url, direction='minimize')
    workers = [start_worker(postgres_url, tmp_path / f'w{worker}', worker) for worker in (0, 1)]
    try:
        outputs = [worker.communicate(timeout=600)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [w.returncode for w in workers] == [0, 0], outputs
    study = optuna.load_study(study_name='shared', storage=postgres_url)
    assert len(study.trials) == 4
    commands = [t.user_attrs['command'] for t in study.trials]
    for worker in (0, 1):  # each worker ran two of the four trials
        assert sum(str(tmp_path / f'w{worker}') in c for c in commands) == 2
    # Each worker saw the whole study when it finished: the one that ended last saw 4 trials.
    assert any('4 trials' in output for output in outputs), outputs


@pytest.mark.parametrize(
    ('flags', 'refusal'),
    [
        (['--lr', '0.01'], 'iknet-tune sets --lr for each trial itself'),
        (['--batch', '512'], 'iknet-tune sets --batch-size'),  # argparse's abbreviation too
        (['--save-model', 'mine.pt'], 'iknet-tune sets --save-model'),
        (['--model-config', '{"width": 64}'], '--model-config sets width, which the trials draw'),
    ],
)
def test_train_flags_a_trial_sets_itself_are_refused_not_dropped(
    tmp_path: Path, capsys, flags: list[str], refusal: str
):
    storage = f'sqlite:///{tmp_path / "study.db"}'
    argv = ['--storage', storage, '--out', str(tmp_path / 'out'), *TRAIN_FLAGS, *flags]
    assert main(argv) == 1
    assert refusal in capsys.readouterr().err
    assert not (tmp_path / 'study.db').exists()


def test_a_mixture_study_keeps_its_model_config_and_does_not_draw_the_proposals(tmp_path: Path):
    storage = f'sqlite:///{tmp_path / "study.db"}'
    config = '{"position_only": true, "n_hypotheses": 32}'
    argv = ['--trials', '1', '--storage', storage, '--out', str(tmp_path / 'out'),
            '--save-model', str(tmp_path / 'best.pt'), *TRAIN_FLAGS, '--model', 'mixture',
            '--model-config', config]  # fmt: skip
    assert main(argv) == 0
    study = optuna.load_study(study_name='iknet', storage=storage)
    assert 'n_hypotheses' not in study.best_trial.params
    model = load_checkpoint(tmp_path / 'best.pt').model
    assert model.config.position_only and model.config.n_hypotheses == 32


def test_two_studies_in_one_folder_keep_their_models_and_flags_apart(tmp_path: Path, capsys):
    storage, out = f'sqlite:///{tmp_path / "study.db"}', tmp_path / 'out'
    for name in ('first', 'second'):
        argv = ['--trials', '1', '--storage', storage, '--study-name', name, '--out', str(out),
                '--save-model', str(tmp_path / f'{name}.pt'), *TRAIN_FLAGS]  # fmt: skip
        assert main(argv) == 0
    models = {name: trial_model(out, name, 0) for name in ('first', 'second')}
    assert all(model.is_file() for model in models.values())
    first = optuna.load_study(study_name='first', storage=storage).best_trial
    assert first.user_attrs['model'] == str(models['first'].resolve())
    # Joining a study for another arm is refused before any trial.
    capsys.readouterr()
    other = ['--trials', '1', '--storage', storage, '--study-name', 'first', '--out', str(out),
             *TRAIN_FLAGS, '--chain', 'so101']  # fmt: skip
    assert main(other) == 1
    error = capsys.readouterr().err
    assert "study 'first' in " in error, error
    assert 'trains for the arm its data says' in error and 'not so101_new_calib:' in error, error
    assert len(optuna.load_study(study_name='first', storage=storage).trials) == 1
    # The same arm with other flags (data at another path on another machine) joins it.
    saved = ['--save-model', str(tmp_path / 'joined.pt')]
    assert main([*saved, *other[:-2], '--seed', '3']) == 0
    assert len(optuna.load_study(study_name='first', storage=storage).trials) == 2
    # A study of a named arm is joined again by that arm (its chain read back from the storage).
    so101 = ['--trials', '1', '--storage', storage, '--study-name', 'arm', '--out', str(out),
             *saved, *TRAIN_FLAGS, '--chain', 'so101']  # fmt: skip
    assert main(so101) == 0 and main(so101) == 0
    assert len(optuna.load_study(study_name='arm', storage=storage).trials) == 2


def trial_model(out: Path, study_name: str, number: int) -> Path:
    """The model trial number of the one study of that name under out wrote."""
    (folder,) = out.glob(f'{study_name}-*')
    return folder / f'trial_{number}' / 'model.pt'


def test_a_study_of_the_same_name_in_another_storage_keeps_its_own_models(tmp_path: Path):
    # Both wrote --out/iknet/trial_0: carried on, the first study copied out the second's model
    # as its best.
    out = tmp_path / 'out'
    for storage, epochs in (('a.db', '3'), ('b.db', '2'), ('a.db', '3')):
        argv = ['--trials', '1', '--storage', f'sqlite:///{tmp_path / storage}', '--out',
                str(out), '--save-model', str(tmp_path / f'best_{storage}.pt'), '--', '--data',
                '--synthetic', '600', '--epochs', epochs]  # fmt: skip
        assert main(argv) == 0
    folders = sorted(out.glob('iknet-*'))
    assert len(folders) == 2
    study = optuna.load_study(study_name='iknet', storage=f'sqlite:///{tmp_path / "a.db"}')
    best = load_checkpoint(tmp_path / 'best_a.db.pt')
    assert Path(study.best_trial.user_attrs['model']).parent.parent in folders
    assert best.training['settings']['epochs'] == 3  # its own model, not b's


def test_a_carried_on_study_draws_new_settings(tmp_path: Path):
    # TPE seeded alike drew the first trial's settings again for the trial after a restart.
    storage = f'sqlite:///{tmp_path / "study.db"}'
    argv = ['--trials', '1', '--storage', storage, '--seed', '0', '--out', str(tmp_path / 'out'),
            '--save-model', str(tmp_path / 'best.pt'), *TRAIN_FLAGS]  # fmt: skip
    assert main(argv) == 0 and main(argv) == 0
    first, second = optuna.load_study(study_name='iknet', storage=storage).trials
    assert first.params != second.params


def test_an_interrupted_study_copies_out_the_best_trial_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    import iknet_train.tune as tune

    train = tune.objective

    def stopped_in_the_second(trial, *args):
        if trial.number == 1:
            raise KeyboardInterrupt  # Ctrl-C during the second trial
        return train(trial, *args)

    monkeypatch.setattr(tune, 'objective', stopped_in_the_second)
    storage = f'sqlite:///{tmp_path / "study.db"}'
    argv = ['--trials', '3', '--storage', storage, '--out', str(tmp_path / 'out'),
            '--save-model', str(tmp_path / 'best.pt'), *TRAIN_FLAGS]  # fmt: skip
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert 'carries it on for --trials more' in captured.err
    assert 'best trial 0: ' in captured.out and (tmp_path / 'best.pt').is_file()


def test_a_best_model_deleted_on_this_machine_is_said_to_be_gone(tmp_path: Path, capsys):
    from iknet_train.tune import build_parser, report

    storage = f'sqlite:///{tmp_path / "study.db"}'
    own = ['--storage', storage, '--out', str(tmp_path / 'out'), '--save-model',
           str(tmp_path / 'best.pt')]  # fmt: skip
    assert main(['--trials', '1', *own, *TRAIN_FLAGS]) == 0
    (tmp_path / 'out' / 'importances.png').write_bytes(b'an earlier study of two trials')
    study = optuna.load_study(study_name='iknet', storage=storage)
    Path(study.best_trial.user_attrs['model']).unlink()
    capsys.readouterr()
    assert report(study, build_parser().parse_args(own)) == 0
    assert 'is no longer there (moved or deleted)' in capsys.readouterr().out
    assert not (tmp_path / 'out' / 'importances.png').exists()  # one trial: none of its own
