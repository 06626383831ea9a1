"""Peer IK libraries for the benchmark, each on the chain iknet uses, when installed.

pytorch-kinematics, roboticstoolbox-python and ikpy are optional (`pip install '.[peers]'`):
a peer that is not importable or fails to build is reported by the caller, never fatal. Each gets
the chain as a URDF generated from `Chain`, so every library solves the same arm, with each
joint's physical reach as its limits (hand-guided recordings pass the software limits).

ikpy starts a thread on import that sends a usage pixel to the internet (its package __init__),
with no opt-out: it is loaded without running that __init__, and the whole benchmark runs under
`offline()`, which refuses any connection or name lookup off this machine.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import ipaddress
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.urdf import chain_to_urdf
from iknet_core.solvers.result import Tolerance

PEER_NAMES = ('roboticstoolbox', 'pytorch-kinematics', 'ikpy')
# Module to import per peer, for the "not installed" check and the message.
PEER_PACKAGES = {
    'roboticstoolbox': ('roboticstoolbox', 'roboticstoolbox-python'),
    'pytorch-kinematics': ('pytorch_kinematics', 'pytorch-kinematics'),
    'ikpy': ('ikpy', 'ikpy'),
}
_LOOPBACK_NAMES = {'localhost', 'localhost.localdomain', 'ip6-localhost'}


@dataclass
class Contender:
    """An IK solver as the benchmark calls it, ours or a peer library's."""

    name: str
    description: str
    # (3,) m, (3, 3) -> anything: one query, as a user would call the library (timed only).
    solve_one: Callable[[np.ndarray, np.ndarray], object]
    # (B, 3) m, (B, 3, 3) -> (B, n) rad: the library's batch call, else a loop of single calls.
    solve_many: Callable[[np.ndarray, np.ndarray], np.ndarray]
    # (3,) m, (3, 3), joints (n,) rad -> (n,) rad: one query warm-started from the given joints
    # (path following); None where the library takes no start joints.
    solve_near: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None


def is_installed(name: str) -> bool:
    """The peer's package can be imported (found without importing it), or is loaded already
    (ikpy, loaded without its __init__, has no spec to find)."""
    module = PEER_PACKAGES[name][0]
    return module in sys.modules or importlib.util.find_spec(module) is not None


def build_peer(name: str, chain: Chain, tolerance: Tolerance, seed: int = 0) -> Contender:
    """The named peer on the chain; ImportError when not installed, other errors as raised."""
    builders = {
        'roboticstoolbox': _roboticstoolbox,
        'pytorch-kinematics': _pytorch_kinematics,
        'ikpy': _ikpy,
    }
    if name not in builders:
        raise ValueError(f'peer must be one of {PEER_NAMES}, got {name!r}')
    if not is_installed(name):
        raise ImportError(f'{PEER_PACKAGES[name][1]} is not installed')
    return builders[name](chain, tolerance, seed)


def _loop(solve_one: Callable[[np.ndarray, np.ndarray], np.ndarray]):
    """A batch as the library offers it when it has no batch call: one query after another."""

    def solve_many(positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        return np.array([solve_one(p, r) for p, r in zip(positions, rotations, strict=True)])

    return solve_many


def _roboticstoolbox(chain: Chain, tolerance: Tolerance, seed: int) -> Contender:
    """The C++ Levenberg-Marquardt solver (`ETS.ik_LM`); its random restarts are drawn in C++,
    so `seed` does not reach them."""
    import roboticstoolbox
    from roboticstoolbox.models.URDF.URDFRobot import URDF_file

    elinks, robot_name, _ = URDF_file(io.StringIO(chain_to_urdf(chain)))
    ets = roboticstoolbox.Robot(elinks, name=robot_name).ets(end=chain.tip_frame)
    # Its tolerance is on E = 0.5 * e^T e (e: m and rad): a position error of tolerance.position.
    residual = 0.5 * tolerance.position**2
    target = np.eye(4)

    def solve_one(position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        target[:3, :3] = rotation
        target[:3, 3] = position
        return np.asarray(ets.ik_LM(target, tol=residual).q, dtype=np.float64)

    def solve_near(position: np.ndarray, rotation: np.ndarray, start: np.ndarray) -> np.ndarray:
        target[:3, :3] = rotation
        target[:3, 3] = position
        return np.asarray(ets.ik_LM(target, q0=start, tol=residual).q, dtype=np.float64)

    return Contender(
        'roboticstoolbox',
        f'roboticstoolbox-python {roboticstoolbox.__version__}: ETS.ik_LM (C++), '
        f'tol E = {residual:.1e}, default 30 iterations x 100 searches',
        solve_one,
        _loop(solve_one),
        solve_near,
    )


def _pytorch_kinematics(chain: Chain, tolerance: Tolerance, seed: int) -> Contender:
    """`PseudoInverseIK` in float64 on the CPU, 10 random retries per pose, batched."""
    import pytorch_kinematics as pk
    import torch

    serial = pk.build_serial_chain_from_urdf(chain_to_urdf(chain), chain.tip_frame)
    serial = serial.to(dtype=torch.float64)
    limits = torch.tensor([joint.reach for joint in chain.joints], dtype=torch.float64)
    torch.manual_seed(seed)
    solver = pk.PseudoInverseIK(
        serial,
        pos_tolerance=tolerance.position,
        rot_tolerance=tolerance.orientation,
        num_retries=10,
        joint_limits=limits,
        early_stopping_any_converged=True,
    )

    def solve_many(positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        targets = pk.Transform3d(
            pos=torch.from_numpy(np.ascontiguousarray(positions)),
            rot=torch.from_numpy(np.ascontiguousarray(rotations)),
            dtype=torch.float64,
        )
        result = solver.solve(targets)
        # The best retry per pose: converged first, then the smallest error (m + rad).
        score = result.err_pos + result.err_rot + 1e3 * (~result.converged)
        best = score.argmin(dim=1)
        return result.solutions[torch.arange(len(best)), best].numpy()

    def solve_one(position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        return solve_many(position[None], rotation[None])[0]

    return Contender(
        'pytorch-kinematics',
        f'pytorch-kinematics {_version("pytorch_kinematics")}: PseudoInverseIK (float64, CPU), '
        '10 retries, batched',
        solve_one,
        solve_many,
    )


def _ikpy(chain: Chain, tolerance: Tolerance, seed: int) -> Contender:
    """`Chain.inverse_kinematics` (scipy optimisation) on the full pose, from zero joints."""
    package = import_package_without_init('ikpy')
    from ikpy.chain import Chain as IkpyChain

    with tempfile.TemporaryDirectory(prefix='iknet-bench-') as directory:
        path = Path(directory) / f'{chain.name}.urdf'
        path.write_text(chain_to_urdf(chain))
        # Links: the base origin, the joints, the fixed tip; only the joints move.
        mask = [False, *([True] * chain.n_joints), False]
        ikpy_chain = IkpyChain.from_urdf_file(
            str(path), base_elements=[chain.base_frame], active_links_mask=mask
        )

    def solve_near(position: np.ndarray, rotation: np.ndarray, start: np.ndarray) -> np.ndarray:
        joints = ikpy_chain.inverse_kinematics(
            target_position=position,
            target_orientation=rotation,
            orientation_mode='all',
            initial_position=np.concatenate([[0.0], start, [0.0]]),
        )
        return np.asarray(joints[1 : 1 + chain.n_joints], dtype=np.float64)

    zero = np.zeros(chain.n_joints)

    def solve_one(position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        return solve_near(position, rotation, zero)

    return Contender(
        'ikpy',
        f'ikpy {package.__version__}: Chain.inverse_kinematics, orientation_mode all, '
        'from zero joints (usage pixel blocked)',
        solve_one,
        _loop(solve_one),
        solve_near,
    )


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution.replace('_', '-'))
    except PackageNotFoundError:
        return 'unknown version'


def import_package_without_init(name: str) -> types.ModuleType:
    """Register package `name` without running its __init__, so only submodules' code runs.

    For packages whose __init__ has side effects the benchmark must not have (ikpy's usage pixel).
    `__version__` is taken from its `_version` module when there is one.
    """
    if name in sys.modules:
        module = sys.modules[name]
        if getattr(module, '__iknet_bare__', False):
            return module
        raise RuntimeError(f'{name} was already imported, with the side effects of its __init__')
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f'{name} is not an installed package')
    module = types.ModuleType(name, f'{name} loaded by iknet without its __init__')
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    module.__iknet_bare__ = True
    sys.modules[name] = module
    try:
        module.__version__ = importlib.import_module(f'{name}._version').__version__
    except (ImportError, AttributeError):
        module.__version__ = _version(name)
    return module


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Refuse connections, datagrams and name lookups off this machine while inside.

    A process-wide audit hook (hooks cannot be removed, so it is installed once and switched on
    here) raises PermissionError before the socket call: no packet leaves, not even a DNS query.
    """
    if not _guard['installed']:
        sys.addaudithook(_refuse_remote)
        _guard['installed'] = True
    _guard['depth'] += 1
    try:
        yield
    finally:
        _guard['depth'] -= 1


_guard = {'installed': False, 'depth': 0}
_CHECKED_EVENTS = {'socket.connect', 'socket.sendto', 'socket.getaddrinfo', 'socket.sendmsg'}


def _refuse_remote(event: str, args: tuple) -> None:
    if not _guard['depth'] or event not in _CHECKED_EVENTS:
        return
    if event == 'socket.getaddrinfo':
        host = args[0]
    else:
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None  # str: a Unix socket
    if not is_local_host(host):
        raise PermissionError(f'iknet-bench runs offline: refused {event} to {host!r}')


def is_local_host(host: object) -> bool:
    """None (no remote end), a loopback name or address."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors='replace')
    host = str(host).split('%')[0]
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
