"""The tracking-network study: trains, compares the seeds, and writes its report."""

import json

from iknet_train.tracking_study import main


def test_the_study_compares_three_seeds_on_the_omx(tmp_path, monkeypatch):
    out = tmp_path / 'study'
    argv = ['--chains', 'omx', '--train-paths', '100', '--epochs', '2', '--test-paths', '10']
    monkeypatch.chdir(tmp_path)
    assert main([*argv, '--out', str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ['study']  # nothing left where it ran
    report = json.loads((out / 'tracking_study.json').read_text())
    seeds = report['arms']['omx']['seeds']
    assert list(seeds) == ['previous waypoint', 'carried on at its velocity', 'tracking network']
    # Every seed starts next to a solution on these smooth paths: all refine to the tolerance,
    # and carrying the last step on saves iterations over the previous waypoint.
    assert all(figures['refined'] == 1.0 for figures in seeds.values())
    carried, previous = seeds['carried on at its velocity'], seeds['previous waypoint']
    assert carried['iterations_mean'] < previous['iterations_mean']
    network = seeds['tracking network']
    assert network['seed_us'] > 0.0  # the compiled forward pass ran (and matched torch's)
    assert network['total_us'] == network['refine_us'] + network['seed_us']
    markdown = (out / 'tracking_study.md').read_text()
    assert '| omx | tracking network |' in markdown
    beats = network['total_us'] < carried['total_us']  # and as often on the curve
    verdict = (
        'beats'
        if beats and network['on_the_curve'] >= carried['on_the_curve']
        else 'does not beat'
    )
    assert '- omx: the tracking network (trained in' in markdown
    assert f"{verdict} follow_path's seed" in markdown
    assert (out / 'tracking_study.png').stat().st_size > 10_000


def test_bad_settings_are_refused(tmp_path, capsys):
    assert main(['--epochs', '0', '--out', str(tmp_path)]) == 1
    assert 'must be at least 1' in capsys.readouterr().err
    # Every arm and tolerance is checked before the first arm trains.
    assert main(['--chains', 'omx', 'nowhere', '--out', str(tmp_path)]) == 1
    assert "error: unknown chain 'nowhere'" in capsys.readouterr().err
    assert main(['--position-tolerance', '-1', '--out', str(tmp_path)]) == 1
    assert 'tolerances must be >= 0' in capsys.readouterr().err
