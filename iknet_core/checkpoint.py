"""One self-describing model file: rebuilds the network and the chain it was trained for.

Contents (plain types and tensors only, so `torch.load(weights_only=True)` reads it):
format, format_version, model_type, model_config, state_dict, normalization (input mean/std;
outputs are angles or (cos, sin) pairs and need none), joint_names, chain (Chain.to_dict) and
training (free-form JSON-able notes: command, data, figures).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from iknet_core.kinematics.chain import Chain
from iknet_core.networks import IKNetwork, build_model, config_to_dict
from iknet_core.resources import shipped

FORMAT = 'iknet-checkpoint'
FORMAT_VERSION = 1
REQUIRED_KEYS = (
    'format',
    'format_version',
    'model_type',
    'model_config',
    'state_dict',
    'normalization',
    'joint_names',
    'chain',
)


@dataclass
class Checkpoint:
    """A loaded model file: the network (eval mode, CPU) and what it was trained for."""

    model: IKNetwork
    model_type: str
    chain: Chain
    joint_names: list[str]
    training: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(
    path: Path | str,
    model: IKNetwork,
    model_type: str,
    chain: Chain,
    training: dict[str, Any] | None = None,
) -> Path:
    """Write the model file atomically (a crash never leaves half a file under its name)."""
    path = Path(path)
    if model.config.n_joints != chain.n_joints:
        raise ValueError(
            f'model predicts {model.config.n_joints} joints, chain {chain.name!r} has '
            f'{chain.n_joints}'
        )
    content = {
        'format': FORMAT,
        'format_version': FORMAT_VERSION,
        'model_type': model_type,
        'model_config': config_to_dict(model.config),
        'state_dict': {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        'normalization': model.normalization(),
        'joint_names': chain.joint_names,
        'chain': chain.to_dict(),
        'training': training or {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(path)
    torch.save(content, partial)
    os.replace(partial, path)
    return path


def partial_path(path: Path | str) -> Path:
    """Where save_checkpoint writes before it renames: hidden, beside the file."""
    path = Path(path)
    return path.with_name(f'.{path.name}.partial')


# Config fields added since format version 1, with the value that rebuilds a model saved before
# them (a config is stored whole, so a field it lacks predates it).
LEGACY_MODEL_CONFIG = {'mixture': {'local_frames': False}}

# How a file torch.save wrote begins: its zip archive, or a pickle (the legacy format).
TORCH_FILE_STARTS = (b'PK\x03\x04', b'\x80')


def load_checkpoint(path: Path | str) -> Checkpoint:
    """Read a model file without unpickling arbitrary objects; ValueError naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'no model file at {path}{_shipped_hint(path)}')
    with path.open('rb') as file:
        head = file.read(16)
    if not head.startswith(TORCH_FILE_STARTS):  # a URDF, a CSV, an ONNX file given as --model
        what = (
            'an ONNX graph, as iknet-export writes: give the .pt checkpoint it was exported from'
            if _is_onnx(path, head)
            else f'not a PyTorch file: it begins {head!r}'
        )
        raise ValueError(f'{path}: not a readable iknet checkpoint ({what})')
    try:
        content = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as error:  # torch raises several types for truncated or foreign files
        reason = _reason(error)
        if head.startswith(TORCH_FILE_STARTS[0]) and not zipfile.is_zipfile(path):
            reason = 'cut short: its zip archive has no end, as a copy or save that did not finish'
        raise ValueError(f'{path}: not a readable iknet checkpoint ({reason})') from error
    if not isinstance(content, dict) or content.get('format') != FORMAT:
        raise ValueError(f'{path}: not an iknet checkpoint (no format={FORMAT!r} entry)')
    missing = [key for key in REQUIRED_KEYS if key not in content]
    if missing:
        raise ValueError(f'{path}: checkpoint lacks {missing}')
    if content['format_version'] != FORMAT_VERSION:
        raise ValueError(
            f'{path}: checkpoint format version {content["format_version"]}, this iknet reads '
            f'version {FORMAT_VERSION}'
        )
    try:
        chain = Chain.from_dict(content['chain'])
        model_type = content['model_type']
        config = {**LEGACY_MODEL_CONFIG.get(model_type, {}), **content['model_config']}
        model = build_model(model_type, config, chain)
        model.load_state_dict(content['state_dict'])
        model.set_normalization(content['normalization'])
    except (ValueError, RuntimeError, TypeError) as error:
        detail = ' '.join(line.strip() for line in str(error).splitlines()[:2])
        raise ValueError(f'{path}: checkpoint does not match its model: {detail}') from error
    joint_names = list(content['joint_names'])
    if joint_names != chain.joint_names or model.config.n_joints != chain.n_joints:
        raise ValueError(
            f'{path}: joint names {joint_names} and a {model.config.n_joints}-joint model do '
            f'not match chain {chain.name!r} ({chain.joint_names})'
        )
    model.eval()
    return Checkpoint(
        model=model,
        model_type=content['model_type'],
        chain=chain,
        joint_names=joint_names,
        training=dict(content['training']),
    )


def _is_onnx(path: Path, head: bytes) -> bool:
    """An ONNX file by its name, or by its first fields (protobuf tags of ir_version, then
    producer_name)."""
    return path.suffix.lower() == '.onnx' or (head[:1] == b'\x08' and head[2:3] == b'\x12')


def _reason(error: Exception) -> str:
    """The informative line of torch.load's (long) error text."""
    text = str(error)
    marker = 'WeightsUnpickler error:'
    if marker in text:  # the unpickler's own words follow the marker, after torch's advice
        detail = text.split(marker, 1)[1].strip().splitlines()
        return f'{marker} {detail[0].strip()}' if detail else marker
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _shipped_hint(path: Path) -> str:
    """Where iknet ships a file of that relative path (the README's models/NAME, typed outside
    the checkout), as words to add to the error; '' if it ships none."""
    if path.is_absolute():
        return ''
    try:
        found = shipped(path)
    except FileNotFoundError:
        return ''
    return f' (iknet ships {path} at {found})'
