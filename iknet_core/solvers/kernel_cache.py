"""Drops numba's cached kernels when any kernel source changed.

numba checks a cached function against its own file's timestamp only, not against the files of
the kernels it calls: after an update that changes settings.py (the settings tuple) but not
policy.py, the cached policy kernels would run with the old tuple and fail. One stamp of every
kernel source, kept beside the cache, catches that: a different stamp empties the cache index of
every kernel before any is loaded, and they compile once more.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

# Every module with cached kernels; a kernel calls only into these.
KERNEL_MODULES = (
    'iknet_core.kinematics.omx_ik',
    'iknet_core.solvers.settings',
    'iknet_core.solvers.kernels',
    'iknet_core.solvers.policy',
    'iknet_core.solvers.analytic',
    'iknet_core.solvers.refined',
    'iknet_core.solvers.path',
    'iknet_core.solvers.path_search',
    'iknet_core.solvers.path_smoothing',
    'iknet_core.solvers.network_kernel',
    'iknet_core.solvers.mixture_kernel',
)
STAMP_FILE = 'iknet-kernel-sources.sha256'


def source_stamp(modules: list) -> str:
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def cached_kernels(modules: list) -> list[CPUDispatcher]:
    return [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__
    ]


def drop_stale_kernels() -> bool:
    """Empty the cache index of every kernel if a kernel source changed since the last check;
    returns whether it did. A cache numba cannot write is left to numba (it compiles in memory)."""
    modules = [importlib.import_module(name) for name in KERNEL_MODULES]
    kernels = cached_kernels(modules)
    stamp = source_stamp(modules)
    stamp_path = Path(FunctionCache(kernels[0].py_func).cache_path) / STAMP_FILE
    try:
        if stamp_path.is_file() and stamp_path.read_text() == stamp:
            return False
        for kernel in kernels:
            FunctionCache(kernel.py_func).flush()
        stamp_path.parent.mkdir(parents=True, exist_ok=True)
        stamp_path.write_text(stamp)
    except OSError:
        return False
    return True
