"""Chains the tests build from the OM-X preset."""

from __future__ import annotations

import math
from dataclasses import replace

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.kinematics.chain import Chain


def omx_with_one_turn_base(continuous: bool = True) -> Chain:
    """The OM-X with joint1's limits and reach one turn, -pi to pi: a URDF's continuous joint,
    or (continuous=False) a revolute joint limited to +-pi."""
    base = replace(
        OMX_CHAIN.joints[0],
        limits=(-math.pi, math.pi),
        reach=(-math.pi, math.pi),
        continuous=continuous,
    )
    return replace(OMX_CHAIN, joints=(base, *OMX_CHAIN.joints[1:]))
