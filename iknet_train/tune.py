"""`iknet-tune`: an optuna study over iknet-train's model and optimiser settings.

Each trial is an iknet-train run (flags after `--` go to every run: data, chain, epochs...); its
validation loss, reported every epoch, lets optuna prune a poor trial early. The study lives in
--storage, a local SQLite file by default or any RDB URL: several processes, on one machine or
many, started with the same --storage and --study-name share the study (optuna's way to
distribute a search).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
import shutil
import signal
import socket
import sys
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import optuna
import pytorch_pfn_extras as ppe
from sqlalchemy.exc import ArgumentError, SQLAlchemyError  # optuna's RDB storage runs on it

from iknet_core.checkpoint import load_checkpoint
from iknet_core.entry import failed
from iknet_core.interrupts import signals_as_interrupt
from iknet_core.output_paths import output_dir, output_file
from iknet_train.cli import HelpFormatter, chain_from_args
from iknet_train.plots import save_figure
from iknet_train.train import build_parser as build_train_parser
from iknet_train.train import check_flags, model_overrides, overridden_flags, train

logger = logging.getLogger(__name__)

# What a trial draws: the residual MLP's size, its hypotheses, and the optimiser's step.
WIDTHS = (64, 128, 256)
BLOCKS = (1, 4)
HYPOTHESES = (2, 4, 8)
LEARNING_RATES = (1e-3, 2e-2)
BATCH_SIZES = (512, 1024, 2048, 4096)

# The study's user attribute naming its trials' folder under --out (study_runs).
RUNS_TOKEN = 'runs_token'
# What fails one trial and lets the study go on: a setting iknet-train refuses, or memory.
TRIAL_ERRORS = (ValueError, RuntimeError)
# What optuna logs of a failed trial in one line, without its traceback.
ONE_LINE_ERRORS = (ValueError, OSError, KeyboardInterrupt)
# How to get SQLAlchemy's usual drivers, by module. SQLAlchemy 2.1 runs postgresql:// on psycopg
# (3); psycopg2-binary, the README's and the tests', needs postgresql+psycopg2:// there.
DRIVER_INSTALLS = {
    'psycopg': "pip install 'psycopg[binary]', or with psycopg2-binary: postgresql+psycopg2://...",
    'psycopg2': 'pip install psycopg2-binary',
    'MySQLdb': 'pip install mysqlclient',
}


class PruneOnValidation(ppe.training.extension.Extension):
    """Reports each epoch's validation loss to the trial; ends the run when optuna prunes it."""

    trigger = (1, 'epoch')
    priority = ppe.training.extension.PRIORITY_READER  # after the Evaluator wrote val/loss

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial

    def __call__(self, manager: ppe.training.ExtensionsManager) -> None:
        loss = manager.observation.get('val/loss')
        if loss is None:
            return
        self.trial.report(float(loss), manager.epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f'epoch {manager.epoch}: val/loss {float(loss):.4g}')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-tune',
        description=__doc__,
        formatter_class=HelpFormatter,
        usage='iknet-tune [options] [-- IKNET-TRAIN FLAGS]',
    )
    parser.add_argument('--trials', type=int, default=20, help='trials this process runs')
    parser.add_argument(
        '--timeout', type=float, default=None, help='s; stop starting trials after this long'
    )
    parser.add_argument(
        '--storage',
        default='sqlite:///iknet_tune.db',
        help='optuna storage: an RDB URL (sqlite:///file.db, postgresql://user@host/db, ...)',
    )
    parser.add_argument('--study-name', default='iknet', help='joins the study if it exists')
    parser.add_argument('--seed', type=int, default=None, help="seeds this process's sampler")
    parser.add_argument(
        '--out', type=output_dir, default='iknet_tune_result', help='trial runs and the plots'
    )
    parser.add_argument(
        '--save-model', type=output_file, default='iknet_tuned.pt', help="the best trial's model"
    )
    return parser


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(iknet-tune's flags, iknet-train's flags after `--`)."""
    argv = list(argv)
    if '--' in argv:
        cut = argv.index('--')
        return argv[:cut], argv[cut + 1 :]
    return argv, []


def drawn_config_keys(model: str) -> tuple[str, ...]:
    """The model-config keys a trial draws. A mixture model's n_hypotheses is how many samples
    it proposes when served, which the validation loss does not see: not drawn for it."""
    return ('width', 'n_blocks') if model == 'mixture' else ('width', 'n_blocks', 'n_hypotheses')


def objective(
    trial: optuna.Trial, train_argv: list[str], given: argparse.Namespace, runs: Path
) -> float:
    """One iknet-train run with the trial's settings; its best validation loss. given: the
    flags after --, parsed (check_train_flags)."""
    draws = {
        'width': lambda: trial.suggest_categorical('width', WIDTHS),
        'n_blocks': lambda: trial.suggest_int('n_blocks', *BLOCKS),
        'n_hypotheses': lambda: trial.suggest_categorical('n_hypotheses', HYPOTHESES),
    }
    # The flags' own model config (position_only, ...) goes to every trial.
    config = {**model_overrides(given)}
    config.update({key: draws[key]() for key in drawn_config_keys(given.model)})
    lr = trial.suggest_float('lr', *LEARNING_RATES, log=True)
    batch_size = trial.suggest_categorical('batch_size', BATCH_SIZES)
    run = runs / f'trial_{trial.number}'
    argv = [
        *train_argv,
        '--model-config', json.dumps(config), '--lr', repr(lr), '--batch-size', str(batch_size),
        *run_outputs(run), '--no-progress',
    ]  # fmt: skip
    args = build_train_parser().parse_args(argv)
    trial.set_user_attr('host', socket.gethostname())
    trial.set_user_attr('command', ' '.join(['iknet-train', *argv]))
    try:
        path = train(args, trial.user_attrs['command'], [PruneOnValidation(trial)])
    except TRIAL_ERRORS as error:  # kept in the study, for the report to say why none completed
        trial.set_user_attr('error', f'{type(error).__name__}: {first_line(error)}')
        raise
    trial.set_user_attr('model', str(path.resolve()))
    return float(load_checkpoint(path).training['best_val_loss'])


def write_plots(study: optuna.Study, out: Path) -> list[Path]:
    """optuna's optimisation history and parameter importances (once two trials completed)."""
    from optuna.visualization import matplotlib as plots

    written = []
    complete = completed(study)
    figures = {'history.png': plots.plot_optimization_history}
    if len(complete) >= 2:
        figures['importances.png'] = plots.plot_param_importances
    else:  # not another study's, left from an earlier run, read as this one's
        (out / 'importances.png').unlink(missing_ok=True)
    for name, plot in figures.items():
        with warnings.catch_warnings():  # optuna marks its matplotlib plots experimental
            warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
            axes = plot(study)
        save_figure(axes.figure, out / name, dpi=120)
        written.append(out / name)
    return written


def run_outputs(run: Path) -> list[str]:
    """A trial's iknet-train outputs: all in its own folder under --out."""
    return ['--save-model', str(run / 'model.pt'), '--out', str(run)]


def study_runs(out: Path, study: optuna.Study) -> Path:
    """Where a study's trials write: a folder of its own, named by the study and a token it
    keeps, so that two studies run in one --out (trial numbers restart with each) do not write
    over each other's models: not two of one name in two storages, nor one started again after
    its storage was deleted (the best model copied out was then the other study's)."""
    if RUNS_TOKEN not in study.user_attrs:
        study.set_user_attr(RUNS_TOKEN, uuid.uuid4().hex[:8])
    return out / f'{safe_name(study.study_name)}-{study.user_attrs[RUNS_TOKEN]}'


def safe_name(study_name: str) -> str:
    """The study's name as a folder name."""
    return re.sub(r'[^\w.-]', '_', study_name)


def check_train_flags(train_argv: list[str], runs: Path) -> argparse.Namespace:
    """Refuse, once before any trial, iknet-train flags every trial would refuse: argparse exits
    with iknet-train's usage, check_flags raises ValueError naming the flag; and flags a trial
    sets itself, which would be dropped without a word. The outputs checked are a trial's, under
    runs, not iknet-train's defaults, which no trial writes. Returns the flags parsed (with
    placeholders for what a trial sets)."""
    if any(flag.startswith('--init-from') for flag in train_argv):
        raise ValueError('trials choose the architecture: --init-from cannot be tuned')
    placeholders = ['--lr', '1e-300', '--batch-size', '1', *run_outputs(runs / 'trial_0')]
    set_per_trial, args = overridden_flags(
        placeholders, train_argv, ('lr', 'batch_size', 'save_model', 'out')
    )
    if set_per_trial:
        raise ValueError(
            f'iknet-tune sets {", ".join(set_per_trial)} for each trial itself (trials draw '
            '--lr and --batch-size and write into --out): leave it out of the flags after --'
        )
    drawn = sorted(set(model_overrides(args)) & set(drawn_config_keys(args.model)))
    if drawn:
        raise ValueError(
            f'--model-config sets {", ".join(drawn)}, which the trials draw: leave it out (the '
            'rest of --model-config goes to every trial)'
        )
    check_flags(args)
    return args


def check_same_arm(
    study: optuna.Study, train_argv: list[str], given: argparse.Namespace, storage: str
) -> None:
    """A study's trials are comparable only if they train for one arm: the first process
    records its arm (--chain/--urdf of given, the flags parsed, or none) and flags after --, and
    a process joining for another arm is refused (its models would be ranked with the first
    arm's); other flags that differ (a URDF or data at another path on another machine) get a
    warning."""
    chain = chain_from_args(given)
    # As the storage gives it back: JSON (tuples read back as lists).
    arm = None if chain is None else json.loads(json.dumps(chain.to_dict()))
    if 'train_flags' not in study.user_attrs:
        study.set_user_attr('arm', arm)
        study.set_user_attr('train_flags', train_argv)
        return
    recorded = study.user_attrs['train_flags']
    recorded_arm = study.user_attrs.get('arm')
    if recorded_arm != arm:
        names = [a['name'] if a else 'the arm its data says' for a in (recorded_arm, arm)]
        raise ValueError(
            f'study {study.study_name!r} in {storage} trains for {names[0]} (iknet-train flags '
            f'{shlex.join(recorded)!r}), not {names[1]}: give its arm, or another --study-name'
        )
    if recorded != train_argv:
        logger.warning(
            'study %r was started with the iknet-train flags %r, these are %r (the same arm): '
            'its trials are ranked as if they trained alike',
            study.study_name, shlex.join(recorded), shlex.join(train_argv),
        )  # fmt: skip


def open_study(args: argparse.Namespace) -> optuna.Study:
    """The study in --storage, created or joined; ValueError naming --storage where it cannot be
    opened (a driver not installed, a URL SQLAlchemy cannot read, a database out of reach)."""
    try:
        study = optuna.create_study(
            storage=args.storage,
            study_name=args.study_name,
            direction='minimize',
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=args.seed),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2),
        )
        # Carried on, the sampler's seed counts the trials before: with --seed alone the
        # carried-on study drew its first trials' settings again (the same models, trained again).
        if args.seed is not None and (done := len(study.trials)):
            study.sampler = optuna.samplers.TPESampler(seed=args.seed + done)
        return study
    except ImportError as error:
        problem = missing_driver(error)
    except ArgumentError as error:  # a URL without a known dialect, or no URL at all
        problem = f'{error}; give an RDB URL such as sqlite:///file.db'
    except SQLAlchemyError as error:
        problem = first_line(error)
    raise ValueError(f'--storage {args.storage}: {problem}')


def missing_driver(error: ImportError) -> str:
    """What to install: optuna's ImportError hides the driver's name in SQLAlchemy's, its cause."""
    module = getattr(error.__cause__, 'name', None)
    if module is None:
        return first_line(error.__cause__ or error)
    install = f' ({DRIVER_INSTALLS[module]})' if module in DRIVER_INSTALLS else ''
    return f'its database driver {module} is not installed{install}'


def first_line(error: BaseException) -> str:
    """The first line of an error's message: SQLAlchemy's and CUDA's go on for several."""
    return str(error).partition('\n')[0]


def one_line_refusals(record: logging.LogRecord) -> bool:
    """optuna's log filter: a trial iknet-train refused (a ValueError naming the flag, a file
    it cannot read) or an interrupt is one line, as iknet-train prints it; a RuntimeError keeps
    its traceback."""
    if record.exc_info and isinstance(record.exc_info[1], ONE_LINE_ERRORS):
        record.exc_info = None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    # The logger optuna reports failed trials on (a private name: tests/test_tune.py sees the
    # tracebacks come back if it moves); adding the same filter again is a no-op.
    optuna.logging.get_logger('optuna.study._optimize').addFilter(one_line_refusals)
    own, train_argv = split_argv(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(own)
    study = None
    with signals_as_interrupt([signal.SIGTERM]) as stopped_by:  # SIGINT: Python's own
        try:
            if args.trials < 1:
                raise ValueError(f'--trials must be >= 1, got {args.trials}')
            try:
                given = check_train_flags(train_argv, args.out / safe_name(args.study_name))
            except SystemExit as exit_:
                return int(exit_.code or 0)
            study = open_study(args)
            check_same_arm(study, train_argv, given, args.storage)
            runs = study_runs(args.out, study)
            runs.mkdir(parents=True, exist_ok=True)
            study.optimize(
                lambda trial: objective(trial, train_argv, given, runs),
                n_trials=args.trials,
                timeout=args.timeout,
                catch=TRIAL_ERRORS,
            )
        except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
            return failed('iknet-tune', error)
        except KeyboardInterrupt:
            print(
                f'iknet-tune: interrupted; the study {args.study_name!r} in {args.storage} keeps '
                'its finished trials (the one cut short is marked failed): the same command '
                'carries it on for --trials more',
                file=sys.stderr,
            )
            if study is not None and completed(study):
                report_after_interrupt(study, args)
            return 128 + stopped_by[-1]
    return report(study, args)


def report_after_interrupt(study: optuna.Study, args: argparse.Namespace) -> None:
    """The best trial so far, copied out as at the end; a second Ctrl-C stops that too, and a
    file that cannot be written is one line."""
    try:
        report(study, args)
    except KeyboardInterrupt:
        pass
    except OSError as error:
        print(f'iknet-tune: error: {error}', file=sys.stderr)


def completed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's trials that completed."""
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def report(study: optuna.Study, args: argparse.Namespace) -> int:
    states = [t.state.name.lower() for t in study.trials]
    counts = ', '.join(f'{states.count(s)} {s}' for s in sorted(set(states)))
    print(f'study {study.study_name!r} in {args.storage}: {len(states)} trials ({counts})')
    try:
        best = study.best_trial
    except ValueError:
        print(f'iknet-tune: no trial completed{first_failure(study)}', file=sys.stderr)
        return 1
    print(f'best trial {best.number}: val/loss {best.value:.4g} with {best.params}')
    model = Path(best.user_attrs.get('model', ''))
    if model.is_file():
        args.save_model.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(model, args.save_model)
        print(f'wrote {args.save_model} (trial {best.number})')
    elif best.user_attrs.get('host') == socket.gethostname():
        print(f'its model {model} is no longer there (moved or deleted)')
    else:
        print(f'its model is {model} on {best.user_attrs.get("host")}, not on this machine')
    for path in write_plots(study, args.out):
        print(f'wrote {path}')
    return 0


def first_failure(study: optuna.Study) -> str:
    """'; trial N failed: why', for the first failed trial whose error the study kept, or ''."""
    for trial in study.trials:
        if trial.state == optuna.trial.TrialState.FAIL and 'error' in trial.user_attrs:
            return f'; trial {trial.number} failed: {trial.user_attrs["error"]}'
    return ''


if __name__ == '__main__':
    sys.exit(main())
