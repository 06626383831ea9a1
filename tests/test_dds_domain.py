"""Picking a ROS domain nobody on this machine uses: a live participant's domain is taken."""

import os

from iknet_ros.dds_domain import bound_udp_ports, domain_in_use, unused_domain_id


def test_ports_decide_which_domain_is_in_use():
    assert domain_in_use(7, {7400 + 250 * 7 + 10})
    assert not domain_in_use(7, {7400 + 250 * 8, 7400 + 250 * 7 - 1})


def test_a_live_participants_domain_is_not_picked(ros):
    ros.node('occupant')
    ros.spin_until(lambda: False, 0.2)
    taken = int(os.environ['ROS_DOMAIN_ID'])
    assert domain_in_use(taken, bound_udp_ports())
    free = taken + 1 if taken < 232 else taken - 1
    if not domain_in_use(free, bound_udp_ports()):
        assert unused_domain_id(range(min(taken, free), max(taken, free) + 1)) == free
