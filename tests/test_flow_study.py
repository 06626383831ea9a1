"""The normalizing-flow study: trains zuko's flow, samples it, and writes its report."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_train.flow_study import PoseConditionedFlow, main, training_ranges
from iknet_train.synthetic import synthetic_samples

pytest.importorskip('zuko', reason='zuko (the test extra) is not installed')


def test_the_study_reports_the_flows_raw_samples(tmp_path):
    out = tmp_path / 'study'
    argv = ['--synthetic', '3000', '--epochs', '1', '--poses', '10', '--samples-per-pose', '4']
    assert main([*argv, '--out', str(out)]) == 0
    report = json.loads((out / 'flow_study.json').read_text())
    names = [f'zuko neural spline flow (latent scale {scale})' for scale in ('1', '0.5')]
    assert list(report['samplers']) == names  # no --mixture given
    # Trained where a mixture model trains by default: the whole reach.
    assert report['flow_training_ranges'] == [list(joint.reach) for joint in OMX_CHAIN.joints]
    flow = report['samplers'][names[0]]
    assert math.isfinite(flow['position_error_mm']['mean']) and flow['ms_per_1000_samples'] > 0
    assert '| zuko neural spline flow (latent scale 0.5) |' in (out / 'flow_study.md').read_text()
    assert (out / 'flow_study.png').stat().st_size > 5_000


def test_the_flow_trains_where_the_compared_mixture_model_trained():
    recorded = [[-1.0, 1.0], [-0.5, 0.5], [-0.4, 0.4], [-0.3, 0.3]]
    mixture = SimpleNamespace(training={'data': {'synthetic_ranges': recorded}})
    np.testing.assert_array_equal(training_ranges(OMX_CHAIN, mixture), recorded)
    unrecorded = SimpleNamespace(training={})
    np.testing.assert_array_equal(
        training_ranges(OMX_CHAIN, unrecorded), [joint.reach for joint in OMX_CHAIN.joints]
    )


def test_training_raises_the_likelihood_of_a_fixed_batch():
    torch.manual_seed(0)
    poses, joints = (
        torch.as_tensor(a, dtype=torch.float32) for a in synthetic_samples(OMX_CHAIN, 512)
    )
    flow = PoseConditionedFlow(OMX_CHAIN, poses, joints, transforms=2, hidden=32)
    optimizer = torch.optim.Adam(flow.parameters(), lr=3e-3)
    before = flow.log_likelihood(poses, joints).mean().item()
    for _ in range(30):
        loss = -flow.log_likelihood(poses, joints).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert flow.log_likelihood(poses, joints).mean().item() > before + 1.0
    with torch.no_grad():
        samples = flow.sample(poses[:3], 5)
    assert samples.shape == (3, 5, 4) and np.isfinite(samples.numpy()).all()


def test_a_model_that_does_not_sample_is_refused(tmp_path, capsys):
    argv = ['--synthetic', '100', '--epochs', '1', '--mixture', str(shipped(DEFAULT_MODEL))]
    assert main([*argv, '--out', str(tmp_path)]) == 1
    assert 'is not a mixture model of open_manipulator_x whole poses' in capsys.readouterr().err
    assert main(['--epochs', '0', '--out', str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith('python -m iknet_train.flow_study: error: --')
    cut = tmp_path / 'cut.pt'
    cut.write_bytes(shipped(DEFAULT_MODEL).read_bytes()[:5000])
    for model, message in ((cut, 'cut short'), (tmp_path / 'none.pt', 'no model file at')):
        assert main([*argv[:4], '--mixture', str(model), '--out', str(tmp_path)]) == 1
        assert message in capsys.readouterr().err
