"""The planner-to-quadrotor link: drops and delays as configured, in order, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.params import LinkParams
from cableload_sim.physics.link import InFlight, LinkModel, LinkStats, make_links

PAPER = LinkParams(enabled=True, drop_fraction=0.2, delay_min_s=0.0, delay_max_s=0.03)
PERIOD = 0.1


def transmit_many(link: LinkModel, count: int) -> list[float | None]:
    return [link.transmit(k * PERIOD) for k in range(count)]


def test_drop_fraction_and_delays_match_the_config(rng):
    count = 20_000
    arrivals = transmit_many(LinkModel(PAPER, rng), count)
    lost = sum(a is None for a in arrivals)
    # binomial: 20 % of 20 000 has a standard deviation of 57 plans; 5 sigma
    assert abs(lost - 0.2 * count) < 5 * np.sqrt(count * 0.2 * 0.8)
    delays = np.array([a - k * PERIOD for k, a in enumerate(arrivals) if a is not None])
    assert delays.min() >= 0.0 and delays.max() <= 0.03
    # uniform on [0, 30 ms]: mean 15 ms, deciles every 3 ms (Kolmogorov-Smirnov, 1 % level)
    assert delays.mean() == pytest.approx(0.015, abs=3e-4)
    grid = np.linspace(0.0, 0.03, 61)
    cdf = np.searchsorted(np.sort(delays), grid, side="right") / delays.size
    assert np.max(np.abs(cdf - grid / 0.03)) < 1.63 / np.sqrt(delays.size)


def test_delay_bounds_are_respected(rng):
    params = LinkParams(enabled=True, drop_fraction=0.0, delay_min_s=0.01, delay_max_s=0.02)
    arrivals = transmit_many(LinkModel(params, rng), 2000)
    delays = np.array([a - k * PERIOD for k, a in enumerate(arrivals)])
    assert delays.min() >= 0.01 and delays.max() <= 0.02
    assert delays.min() < 0.0105 and delays.max() > 0.0195


def test_messages_never_overtake_each_other(rng):
    """Delays longer than the sending period: arrivals stay in the order of sending."""
    params = LinkParams(enabled=True, drop_fraction=0.3, delay_min_s=0.0, delay_max_s=0.5)
    link = LinkModel(params, rng)
    sent = np.arange(500) * 0.05
    arrivals = [(t, link.transmit(t)) for t in sent]
    kept = [(t, a) for t, a in arrivals if a is not None]
    assert all(a >= t for t, a in kept)
    assert np.all(np.diff([a for _, a in kept]) >= 0.0)


def test_a_disabled_link_delivers_everything_at_once(rng):
    link = LinkModel(LinkParams(enabled=False, drop_fraction=0.5, delay_max_s=0.1), rng)
    assert transmit_many(link, 50) == [k * PERIOD for k in range(50)]
    assert link.stats() == LinkStats(50, 0, 0.0, 0.0)


def test_same_seed_same_arrivals_and_links_independent():
    a = [transmit_many(link, 300) for link in make_links(PAPER, 3, seed=7)]
    b = [transmit_many(link, 300) for link in make_links(PAPER, 3, seed=7)]
    c = [transmit_many(link, 300) for link in make_links(PAPER, 3, seed=8)]
    assert a == b
    assert a != c
    assert a[0] != a[1]  # each quadrotor's link draws its own fate


def test_stats_count_what_happened(rng):
    links = make_links(PAPER, 2, seed=1)
    arrivals = [transmit_many(link, 1000) for link in links]
    stats = LinkStats.combined([link.stats() for link in links])
    dropped = sum(a is None for run in arrivals for a in run)
    delays = [a - k * PERIOD for run in arrivals for k, a in enumerate(run) if a is not None]
    assert stats.sent == 2000 and stats.dropped == dropped
    assert stats.delay_mean_s == pytest.approx(np.mean(delays), rel=1e-12)
    assert stats.delay_max_s == pytest.approx(max(delays), rel=1e-12)
    assert stats.drop_fraction == pytest.approx(dropped / 2000)


def test_in_flight_hands_over_at_arrival_in_order():
    inbox = InFlight()
    inbox.put(0.13, 1, "b")
    inbox.put(0.12, 0, "a")
    inbox.put(0.13, 2, "c")
    assert inbox.next_arrival() == pytest.approx(0.12)
    assert inbox.due(0.119) == []
    assert inbox.due(0.12) == [(0, "a")]
    assert inbox.due(0.2) == [(1, "b"), (2, "c")]  # ties in the order sent
    assert len(inbox) == 0 and inbox.next_arrival() == np.inf


def test_non_finite_send_time_is_refused(rng):
    with pytest.raises(ValueError, match="t_sent: expected a finite time"):
        LinkModel(PAPER, rng).transmit(float("nan"))
