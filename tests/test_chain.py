import math

import pytest

from iknet_core.kinematics import OMX_CHAIN, Chain
from iknet_core.kinematics.chain import Joint, chain_preset


def test_omx_chain_matches_facts():
    assert OMX_CHAIN.joint_names == ['joint1', 'joint2', 'joint3', 'joint4']
    assert OMX_CHAIN.joints[0].origin_xyz == (0.012, 0.0, 0.017)
    assert [j.limits for j in OMX_CHAIN.joints] == [
        (-math.pi, math.pi),
        (-1.5, 1.5),
        (-1.5, 1.4),
        (-1.7, 1.97),
    ]
    assert OMX_CHAIN.tip_xyz == (0.126, 0.0, 0.0)


def test_dict_round_trip():
    assert Chain.from_dict(OMX_CHAIN.to_dict()) == OMX_CHAIN
    assert chain_preset('omx') is OMX_CHAIN


def test_bad_descriptions_are_refused():
    with pytest.raises(ValueError, match='invalid chain description'):
        Chain.from_dict({'name': 'x'})
    with pytest.raises(ValueError, match='not a unit vector'):
        Joint('j', (0, 0, 0), (0.0, 0.0, 2.0), (-1, 1), (-1, 1))
    with pytest.raises(ValueError, match='unknown chain'):
        chain_preset('ur5')
    # A continuous joint's limits and reach are a whole turn (a path carries it past them), and
    # the mark is a JSON boolean: the string 'false' is not false.
    with pytest.raises(ValueError, match=r'a continuous joint is revolute, its limits a whole'):
        Joint('j', (0, 0, 0), (0.0, 0.0, 1.0), (-1, 1), (-4, 4), continuous=True)
    with pytest.raises(ValueError, match=r'a whole turn, got prismatic'):
        Joint(
            'j',
            (0, 0, 0),
            (0.0, 0.0, 1.0),
            (-4, 4),
            (-4, 4),
            'slide',
            'prismatic',
            continuous=True,
        )
    data = OMX_CHAIN.to_dict()
    data['joints'][0]['continuous'] = 'false'
    with pytest.raises(ValueError, match="expected true or false, got 'false'"):
        Chain.from_dict(data)


def test_a_model_for_the_same_joints_with_another_geometry_says_what_differs():
    from dataclasses import replace

    from iknet_core.kinematics.chain import model_chain_for

    joints = list(OMX_CHAIN.joints)
    joints[2] = replace(joints[2], origin_xyz=(0.13, 0.0, 0.0))
    longer = replace(OMX_CHAIN, joints=tuple(joints))
    differs = (
        r"not the 'open_manipulator_x' asked for, which has the same name: they differ in joint3 "
        r'origin_xyz \(0.024, 0.0, 0.128\) vs \(0.13, 0.0, 0.0\)'
    )
    with pytest.raises(ValueError, match=differs):
        model_chain_for(longer, OMX_CHAIN, 'omx.pt')
    with pytest.raises(ValueError, match=r'tip_xyz \(0.126, 0.0, 0.0\) vs \(0.2, 0.0, 0.0\)'):
        model_chain_for(replace(OMX_CHAIN, tip_xyz=(0.2, 0.0, 0.0)), OMX_CHAIN, 'omx.pt')
    assert model_chain_for(None, OMX_CHAIN, 'omx.pt') is OMX_CHAIN
