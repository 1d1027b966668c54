"""Episode metrics accumulated chunk by chunk equal the metrics of the whole episode."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.metrics import EpisodeMetrics, episode_metrics
from cableload_sim.physics.world import WorldSamples
from cableload_sim.rotations import quat_normalize


def random_samples(rng, k: int, n: int) -> WorldSamples:
    tension = rng.uniform(-1.0, 5.0, size=(k, n))
    tension[40:75, 1] = 0.0  # a long slack run that crosses chunk boundaries
    return WorldSamples(
        t=0.01 * np.arange(1, k + 1),
        load_p=rng.normal(size=(k, 3)),
        load_q=quat_normalize(rng.normal(size=(k, 4))),
        load_v=rng.normal(size=(k, 3)),
        load_omega=rng.normal(size=(k, 3)),
        uav_p=rng.normal(scale=3.0, size=(k, n, 3)),
        uav_q=quat_normalize(rng.normal(size=(k, n, 4))),
        uav_v=rng.normal(size=(k, n, 3)),
        uav_omega=rng.normal(size=(k, n, 3)),
        rotor_speeds=rng.uniform(500, 2500, (k, n, 4)),
        cable_tension=tension,
    )


def chunks(samples: WorldSamples, bounds):
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        yield lo, hi, WorldSamples(**{f: getattr(samples, f)[lo:hi] for f in samples.FIELDS})


def longest_slack_by_hand(tension: np.ndarray, dt: float) -> float:
    longest = 0
    for cable in (tension <= 0.0).T:
        run = 0
        for slack in cable:
            run = run + 1 if slack else 0
            longest = max(longest, run)
    return longest * dt


def test_chunked_metrics_equal_those_of_the_whole(rng, paper_config):
    k, n = 200, paper_config.system.n_uavs
    samples = random_samples(rng, k, n)
    ref_p = rng.normal(size=(k, 3))
    ref_q = quat_normalize(rng.normal(size=(k, 4)))
    whole = episode_metrics(samples, ref_p, ref_q, paper_config.system)
    streamed = EpisodeMetrics(paper_config.system)
    for lo, hi, part in chunks(samples, [0, 7, 45, 46, 60, 130, 200]):
        streamed.update(part, ref_p[lo:hi], ref_q[lo:hi])
    result = streamed.result()
    assert result.keys() == whole.keys()
    for key, value in whole.items():
        assert result[key] == pytest.approx(value, rel=1e-12), key
    assert whole["longest_slack_s"] == pytest.approx(
        longest_slack_by_hand(samples.cable_tension, 0.01), rel=1e-12
    )
    assert whole["longest_slack_s"] >= 0.35  # the 35-sample run, across three chunks
    assert whole["rmse_position_m"] == pytest.approx(
        np.sqrt(np.mean(np.sum((samples.load_p - ref_p) ** 2, axis=1))), rel=1e-12
    )


def test_nan_propagates_and_empty_is_nan(rng, paper_config):
    system = paper_config.system
    empty = EpisodeMetrics(system).result()
    assert np.isnan(empty["rmse_position_m"]) and empty["sim_time_s"] == 0.0
    samples = random_samples(rng, 100, system.n_uavs)
    metrics = EpisodeMetrics(system)
    metrics.update(samples, np.full((100, 3), np.nan), np.full((100, 4), np.nan))
    result = metrics.result()
    assert np.isnan(result["rmse_position_m"]) and np.isnan(result["rmse_orientation_deg"])
    assert np.isfinite(result["min_uav_distance_m"])
