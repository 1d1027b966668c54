"""``cableload world``'s link, without a ROS master: a reference received by the world reaches
its pilot at its arrival in world time, never earlier; a lost one never does; with the link
off, at the start of the next slice as before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backends.pilot import PilotState
from backends.world_node import WorldNode, WorldOptions
from cableload_sim.params import LinkParams

SLICES = 20
"""World slices run after a reference is received (10 ms each at the default state rate)."""


def make_world(config, link: LinkParams | None, flying: bool) -> tuple[WorldNode, list]:
    """A world with every pilot enabled (and started when ``flying``), already one slice on;
    and the list of world clocks (s) at which a pilot was handed a reference."""
    if link is not None:
        config = dataclasses.replace(config, link=link)
    world = WorldNode(config, WorldOptions(real_time_factor=0.0))
    for i in range(world.n):
        world.receive(i, "enable", True)
        if flying:
            world.receive(i, "start", None)
    world.step_slice()
    assert all(p.state is (PilotState.HOVER if flying else PilotState.ENABLED) for p in world.pilots)
    handed = []
    for pilot in world.pilots:

        def recorded(ref, now, offer=pilot.offer):
            handed.append(world.clock)
            return offer(ref, now)

        pilot.offer = recorded
    return world, handed


def reference_from_here(world: WorldNode, i: int, duration_s: float = 1.0) -> dict:
    """Quadrotor ``i``'s reference as the trajectory topic gives it: hold its position from the
    world's current clock on (node times in ROS time)."""
    t = world.clock + np.linspace(0.0, duration_s, 11)
    p = np.repeat(world.sim.world_state().uav_p[i][None, :], t.size, axis=0)
    zeros = np.zeros_like(p)
    return {"t": t, "p": p, "v": zeros, "a": zeros, "j": zeros, "w": zeros}


def link(**values) -> LinkParams:
    return LinkParams(**{"enabled": True, "drop_fraction": 0.0, **values})


@pytest.mark.parametrize("flying", [True, False])
def test_a_lost_reference_never_reaches_the_pilot(paper_config, flying):
    # drop_fraction 1 is refused in a config file; the dataclass takes it for this test
    world, handed = make_world(paper_config, link(drop_fraction=1.0), flying)
    for _ in range(SLICES):
        for i in range(world.n):
            world.receive(i, "trajectory", reference_from_here(world, i))
        world.step_slice()
    assert handed == []
    assert all(p.queue.accepted == p.queue.rejected == 0 for p in world.pilots)
    stats = world.link_stats()
    assert (stats.sent, stats.dropped) == (SLICES * world.n, SLICES * world.n)
    assert f"{SLICES * world.n} references sent, {SLICES * world.n} lost" in world.summary()


@pytest.mark.parametrize("delay_s", [0.05, 0.037])
@pytest.mark.parametrize("flying", [True, False])
def test_a_late_reference_reaches_the_pilot_at_its_arrival_and_not_before(paper_config, delay_s, flying):
    world, handed = make_world(paper_config, link(delay_min_s=delay_s, delay_max_s=delay_s), flying)
    received = world.clock  # the world takes it at the start of its next slice
    world.receive(0, "trajectory", reference_from_here(world, 0))
    for _ in range(SLICES):
        world.step_slice()
        if handed:
            assert world.pilots[0].queue.accepted == 1
    assert len(handed) == 1
    arrived = handed[0] - received
    assert arrived >= delay_s - 1e-9, f"handed over {arrived:.6f} s after receipt"
    assert arrived < delay_s + world.sim.h, "handed over later than the step of its arrival"
    if flying:  # the pilot tracks it from its arrival: the controller has its plan
        assert world.pilots[0].state is PilotState.TRACKING
    assert "1 references sent, 0 lost" in world.summary()


def test_without_the_link_a_reference_reaches_the_pilot_at_the_next_slice(paper_config):
    world, handed = make_world(paper_config, None, flying=True)
    received = world.clock
    world.receive(0, "trajectory", reference_from_here(world, 0))
    world.step_slice()
    assert handed == [received]
    assert world.pilots[0].queue.accepted == 1
    assert world.link_stats().sent == 0 and "link" not in world.summary()
