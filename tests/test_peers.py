"""Peer libraries: ikpy without its usage pixel, no traffic off the machine."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.metrics import pose_errors
from iknet_core.solvers.result import Tolerance
from iknet_train import peers
from iknet_train.synthetic import synthetic_samples


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package whose __init__ would phone home (here: fail loudly)."""
    package = tmp_path / 'phonehome'
    package.mkdir()
    (package / '__init__.py').write_text("raise RuntimeError('the __init__ ran')\n")
    (package / '_version.py').write_text("__version__ = '1.2.3'\n")
    (package / 'solver.py').write_text('from . import _version\nANSWER = 42\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    yield 'phonehome'
    for name in [n for n in sys.modules if n.split('.')[0] == 'phonehome']:
        del sys.modules[name]


def test_a_package_loads_without_running_its_init(fake_package: str) -> None:
    module = peers.import_package_without_init(fake_package)
    assert module.__version__ == '1.2.3'
    from phonehome import solver  # importable only after the bare load

    assert solver.ANSWER == 42
    assert peers.import_package_without_init(fake_package) is module


def test_a_package_imported_before_is_refused(fake_package: str, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, fake_package, type(sys)('phonehome'))
    with pytest.raises(RuntimeError, match='already imported'):
        peers.import_package_without_init(fake_package)


def test_offline_refuses_remote_hosts_before_any_packet_and_allows_loopback() -> None:
    with peers.offline():
        with pytest.raises(PermissionError, match='getaddrinfo'):
            socket.getaddrinfo('example.com', 443)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            with pytest.raises(PermissionError, match=r'192\.0\.2\.1'):
                udp.sendto(b'x', ('192.0.2.1', 9))
            with pytest.raises(PermissionError, match='connect'):
                udp.connect(('192.0.2.1', 9))
        with socket.socket() as server, socket.socket() as client:
            server.bind(('127.0.0.1', 0))
            server.listen(1)
            client.connect(server.getsockname())
    assert peers.is_local_host('::1') and peers.is_local_host('localhost')
    assert not peers.is_local_host('10.0.0.1')


@pytest.mark.parametrize('name', peers.PEER_NAMES)
def test_installed_peers_solve_the_chain(name: str) -> None:
    """Only where the optional peer is installed (`pip install '.[peers]'`)."""
    if not peers.is_installed(name):
        pytest.skip(f'{name} is not installed')
    poses, joints = synthetic_samples(OMX_CHAIN, 5, seed=3, ranges=np.array([[-0.3, 0.3]] * 4))
    positions, rotations = forward_kinematics(OMX_CHAIN, joints)
    with peers.offline():
        peer = peers.build_peer(name, OMX_CHAIN, Tolerance())
        solved = peer.solve_many(positions, rotations)
        single = peer.solve_one(positions[0], rotations[0])
    position_error, _ = pose_errors(OMX_CHAIN, solved, poses)
    assert solved.shape == (5, 4) and single.shape == (4,)
    assert position_error.max() < 1e-5  # m
    if name == 'ikpy':
        assert getattr(sys.modules['ikpy'], '__iknet_bare__', False)
