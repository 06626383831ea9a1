"""Seeds from a trained network: K joint hypotheses per pose, on the backend that fits the call.

Backends: `compiled` (numba, for the server: tens of microseconds for one pose; a mixture model's
16 samples in a few hundred), `torch` (CPU or CUDA, for big batches) and `onnxruntime` (the
exported graph, for deployment parity). Whatever the backend, refinement and the branch policy
make the final answer the same (a mixture model's samples differ between backends, and so may
the solution chosen on a redundant arm; each is exact).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from iknet_core.checkpoint import load_checkpoint
from iknet_core.device import resolve_device
from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.transforms import quaternion_from_matrix
from iknet_core.networks import MixtureIKNet
from iknet_core.resources import DEFAULT_MODEL, SEED_MODEL, shipped
from iknet_core.solvers.base import check_poses
from iknet_core.solvers.mixture_kernel import CompiledMixture
from iknet_core.solvers.network_kernel import CompiledNetwork, compiles

logger = logging.getLogger(__name__)

BACKENDS = ('compiled', 'torch', 'onnxruntime')
# Above this many poses a vectorised backend beats the compiled single-pose loop.
COMPILED_MAX_BATCH = 16
# Up to this many samples drawn in a call, the compiled sampler draws a mixture model's faster
# than torch on one thread (Panda: 16 of one pose in 0.27-0.30 ms against 3.9-4.4; on a slow
# host, 1,024 of one pose 27.8 ms against 34.6, 256 of each of 4 poses 27.2 against 32.6, 16 of
# each of 64 32.0 against 35.4); torch (or CUDA) draws bigger calls (2,048 of one pose 55.7
# against 55.8 ms, 16 of each of 256 poses 127 against 115).
COMPILED_MAX_SAMPLES = 1024
CPU_BLOCK_ROWS = 2048
# The OM-X checkpoint each learned solver loads when given none. The accurate network (width 128,
# 0.44 mm median on the recordings) answers alone. Refinement makes any seed exact, and on this
# 4-joint arm it converges from zero in ~10 iterations of 0.6 us, so a seed must cost less than
# that: the accurate network's forward pass alone takes 10 us (its 424 KB of weights are read
# per query); a width-32 network takes 2 us and leaves ~3 iterations.
SHIPPED_MODELS = {'network': DEFAULT_MODEL, 'network+refine': SEED_MODEL}


class NetworkProposer:
    """A checkpoint loaded once: (B, 3) m, (B, 3, 3) -> hypotheses (B, K, n) rad."""

    def __init__(
        self, model_path: Path | str | None = None, device: str = 'auto', backend: str = 'compiled'
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f'backend must be one of {BACKENDS}, got {backend!r}')
        self.model_path = Path(model_path) if model_path else shipped(DEFAULT_MODEL)
        checkpoint = load_checkpoint(self.model_path)
        self.chain = checkpoint.chain
        self.model_type = checkpoint.model_type
        self.backend = backend
        self.device = resolve_device(device)
        self.model = checkpoint.model.to(self.device).eval()
        self._compiled = None
        self._session = None
        self._graph = ''  # what onnxruntime serves: the exported file, or the network exported now
        sampled = isinstance(checkpoint.model, MixtureIKNet)
        # On the CPU, batches in blocks whose activations stay in the cache: the trunk's
        # element-wise ops (SiLU, layer norm) take half its time, and the forward pass of 10,000
        # UR5 poses took 27 ms instead of 31.5. Not for a mixture model: its samples are drawn
        # per call from a fixed generator, so blocks would repeat each other's draws.
        self._in_blocks = self.device.type == 'cpu' and not sampled
        self._sampler = None
        if backend == 'compiled' and not (sampled or compiles(checkpoint.model)):
            # The reference IKNet (a baseline) has no numba kernel: it runs in torch.
            logger.info('%s (%s) runs in torch: it does not compile', model_path, self.model_type)
            self.backend = backend = 'torch'
        if backend == 'compiled' and sampled:
            self._sampler = CompiledMixture(checkpoint.model)
        elif backend == 'compiled':
            self._compiled = CompiledNetwork(checkpoint.model)
        elif backend == 'onnxruntime' and sampled:
            raise ValueError(
                f'{self.model_path} is a mixture model: it samples in torch, not onnxruntime'
            )
        elif backend == 'onnxruntime':
            self._session, self._graph = _onnx_session(
                self.model_path, checkpoint.model, self.chain
            )

    def describe(self) -> str:
        return (
            f'{self.model_type} network from {self.model_path} on {self.backend}'
            f' ({self._graph if self.backend == "onnxruntime" else self.device})'
        )

    @property
    def n_hypotheses(self) -> int:
        """Hypotheses per pose when no count is asked for."""
        return self.model.n_hypotheses

    @property
    def samples(self) -> bool:
        """The model draws samples (a mixture model), so it can propose any count per pose."""
        return isinstance(self.model, MixtureIKNet)

    @property
    def compiled_network(self) -> CompiledNetwork | None:
        """The numba network, for kernels that run it inside (a single query's first try in
        refined.py); None on the other backends."""
        return self._compiled

    def __call__(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        count: int | None = None,
        seed: int = 0,
    ) -> np.ndarray:
        """count hypotheses per pose: only a model that samples takes another count than its
        own (ValueError otherwise). The same poses, count and seed draw the same samples; another
        seed draws others (a pose whose first samples fell short asks again)."""
        positions, rotations = check_poses(positions, rotations)
        if count is not None and not self.samples:
            raise ValueError(
                f'{self.model_path} is a {self.model_type} network with '
                f'{self.model.n_hypotheses} fixed hypotheses; only a mixture model samples '
                f'{count}'
            )
        if self._compiled is not None and len(positions) <= COMPILED_MAX_BATCH:
            return self._compiled(positions, rotations)
        if self._sampler is not None:
            count = self.n_hypotheses if count is None else count
            drawn = len(positions) * math.ceil(self.model.config.oversampling * count)
            if drawn <= COMPILED_MAX_SAMPLES:
                return self._sampler(positions, rotations, count, seed=seed)
        poses = np.concatenate([positions, quaternion_from_matrix(rotations)], -1)
        poses = poses.astype(np.float32)
        if self._session is not None:
            (hypotheses,) = self._session.run(None, {'poses': poses})
            return hypotheses.astype(np.float64)
        inputs = torch.from_numpy(poses).to(self.device)
        with torch.inference_mode():
            if self._in_blocks and len(inputs) > CPU_BLOCK_ROWS:
                blocks = inputs.split(CPU_BLOCK_ROWS)
                hypotheses = torch.cat([self.model(block) for block in blocks])
            elif count is not None:
                hypotheses = self.model(inputs, count, seed)
            else:
                hypotheses = self.model(inputs)
        return hypotheses.cpu().numpy().astype(np.float64)


def load_networks(
    model_path: Path | str | None,
    solvers: Iterable[str],
    device: str = 'auto',
    backend: str = 'compiled',
    arm: Chain | None = None,
) -> dict[str, NetworkProposer]:
    """The network of each learned solver among solvers: model_path for every one, or each
    one's shipped OM-X checkpoint (SHIPPED_MODELS); a file is loaded once. None without
    model_path for an arm other than the OM-X: the shipped ones do not serve it. ValueError when
    the networks are for different chains (the solvers serve one arm)."""
    if not model_path and arm is not None and arm != OMX_CHAIN:
        return {}
    paths = {
        name: Path(model_path) if model_path else shipped(SHIPPED_MODELS[name])
        for name in solvers
        if name in SHIPPED_MODELS
    }
    loaded = {path: NetworkProposer(path, device, backend) for path in set(paths.values())}
    networks = list(loaded.values())
    for other in networks[1:]:
        if other.chain != networks[0].chain:
            raise ValueError(
                f'{networks[0].model_path} and {other.model_path} are for different chains '
                f'({networks[0].chain.name!r}, {other.chain.name!r}); the solvers serve one arm'
            )
    return {name: loaded[path] for name, path in paths.items()}


def _onnx_session(model_path: Path, model, chain) -> tuple[object, str]:
    """The exported graph beside the checkpoint (iknet-export) when it was exported from this
    very checkpoint, else the network exported now, in memory; and which of the two it is."""
    import onnxruntime

    from iknet_core.onnx_graph import exported_from, onnx_bytes

    onnx_path = model_path.with_suffix('.onnx')
    if onnx_path.is_file() and exported_from(onnx_path, model_path):
        graph, source = str(onnx_path), f'the graph {onnx_path}'
    else:
        if onnx_path.is_file():
            logger.warning(
                '%s is not stamped as exported from %s as it is now (another network, or an '
                'iknet-export before stamps): serving the checkpoint exported in memory; '
                're-export it to serve the file',
                onnx_path, model_path,
            )  # fmt: skip
        graph, source = onnx_bytes(copy.deepcopy(model).cpu(), chain), 'exported in memory'
    options = onnxruntime.SessionOptions()
    # One query at a time is the common call: threads only add hand-off latency there.
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(graph, options, providers=['CPUExecutionProvider'])
    return session, source
