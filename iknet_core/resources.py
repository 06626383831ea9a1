"""Where the shipped dataset and models are: colcon install, pip install or source tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = 'iknet'
DEFAULT_MODEL = Path('models') / 'omx_iknet.pt'
# The OM-X's small network that seeds refinement (network.SHIPPED_MODELS says why).
SEED_MODEL = Path('models') / 'omx_seed.pt'
# A sampler of the Panda's solutions (many solutions per pose on an arm with joints to spare).
PANDA_MODEL = Path('models') / 'panda_mixture.pt'
TRAIN_DATA = Path('dataset') / 'train'
TEST_DATA = Path('dataset') / 'test'


def share_directories() -> list[Path]:
    """Candidate roots holding dataset/ and models/, most specific first."""
    candidates = []
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / 'share' / PACKAGE)
    candidates.append(Path(sys.prefix) / 'share' / PACKAGE)
    # A source checkout (or editable install): the repository root above this package.
    candidates.append(Path(__file__).resolve().parent.parent)
    return candidates


def shipped(relative: Path | str) -> Path:
    """Path of a file or folder iknet ships; FileNotFoundError listing where it looked."""
    for root in share_directories():
        path = root / relative
        if path.exists():
            return path
    searched = ', '.join(str(root / relative) for root in share_directories())
    raise FileNotFoundError(f'{relative} is not installed; looked in: {searched}')


def installed_executable(name: str) -> Path:
    """The `ros2 run iknet NAME` program (lib/iknet/NAME under an ament prefix)."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        path = Path(prefix) / 'lib' / PACKAGE / name
        if prefix and path.is_file():
            return path
    raise FileNotFoundError(
        f'iknet executable {name!r} is not installed; build with colcon and source the install '
        '(or run `make test` once and `. ./env.sh`)'
    )
