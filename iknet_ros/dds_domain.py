"""A ROS domain that no DDS participant on this machine is using, for the tests, the demo and the
benchmarks: two of them running at once on one machine must not talk to each other's nodes."""

from __future__ import annotations

import random
from pathlib import Path

# RTPS well-known ports: domain d owns UDP ports PORT_BASE + DOMAIN_GAIN * d onwards.
PORT_BASE = 7400
DOMAIN_GAIN = 250
UDP_TABLES = (Path('/proc/net/udp'), Path('/proc/net/udp6'))


def bound_udp_ports() -> set[int]:
    """Local UDP ports with a socket bound on this machine (empty where /proc is not Linux's)."""
    ports = set()
    for table in UDP_TABLES:
        if table.exists():
            for line in table.read_text().splitlines()[1:]:
                ports.add(int(line.split()[1].rsplit(':', 1)[1], 16))
    return ports


def domain_in_use(domain: int, ports: set[int]) -> bool:
    first = PORT_BASE + DOMAIN_GAIN * domain
    return any(first <= port < first + DOMAIN_GAIN for port in ports)


def unused_domain_id(candidates: range) -> int:
    """A random domain from candidates whose ports nobody has bound (any of them if all are)."""
    ports = bound_udp_ports()
    free = [domain for domain in candidates if not domain_in_use(domain, ports)]
    return random.choice(free or list(candidates))
