"""One conformance check for every backend (Gymnasium's ``check_env`` for this protocol).

``check_backend(factory, scenario)`` builds a backend, runs it through reset, observe, send,
advance, health and close with hover plans, sends a malformed plan (it must be refused: an
exception at ``send`` or a count in ``health().rejected_plans``, the system unharmed), and, for
a deterministic backend, checks that a second backend from the same factory gives bit-identical
samples. It raises ``AssertionError`` naming the first check that fails and returns the names of
those that passed.

``python -m backends.conformance --backend gazebo`` runs it against the ROS world at
``ROS_MASTER_URI`` and prints the passed checks as JSON (the tests run it so, in a process of
its own).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import numpy as np

from backends.base import Backend, BackendHealth, Scenario
from cableload_sim.params import SystemParams
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState
from planners.base import hover_plan


def _check(condition: bool | np.bool_, what: str) -> None:
    if not condition:
        raise AssertionError(f"backend conformance: {what}")


def _finite_state(state: WorldState, n: int, what: str) -> None:
    _check(isinstance(state, WorldState), f"{what} returns a WorldState")
    _check(state.n_uavs == n, f"{what}: {n} quadrotors in the state, got {state.n_uavs}")
    _check(state.is_finite(), f"{what}: finite state")


def _fly(backend, periods: int) -> list[WorldSamples]:
    """Hover plans at each quadrotor's position for ``periods`` planner periods."""
    out = []
    for _ in range(periods):
        state = backend.observe()
        for i in range(state.n_uavs):
            backend.send(i, hover_plan(state.t, state.uav_p[i]))
        out.append(backend.advance())
    return out


def check_backend(
    factory: Callable[[], Backend], scenario: Scenario, *, deterministic: bool | None = None, periods: int = 5
) -> list[str]:
    passed = []
    backend = factory()
    try:
        _check(isinstance(backend, Backend), "implements the Backend protocol")
        _check(isinstance(backend.system, SystemParams), "system is a SystemParams")
        period = backend.planner_period_s
        _check(np.isfinite(period) and period > 0.0, f"planner_period_s > 0, got {period!r}")
        n = backend.system.n_uavs
        passed.append("protocol")

        state = backend.reset(scenario)
        _finite_state(state, n, "reset")
        _check(abs(state.t) < period, f"reset: episode time starts near 0, got {state.t}")
        error = np.linalg.norm(state.load_p - scenario.load_p)
        _check(error < 0.05, f"reset: load at the scenario's position ({error:.3f} m away)")
        _finite_state(backend.observe(), n, "observe")
        passed.append("reset-observe")

        t_before = backend.time
        flown = _fly(backend, periods)
        for k, samples in enumerate(flown):
            _check(
                isinstance(samples, WorldSamples) and samples.n_uavs == n,
                "advance returns WorldSamples of every quadrotor",
            )
            _check(len(samples) > 0, f"advance {k}: samples recorded")
            _check(bool(np.all(np.diff(samples.t) > 0.0)), f"advance {k}: increasing times")
            _check(
                all(np.isfinite(getattr(samples, f)).all() for f in WorldSamples.FIELDS),
                f"advance {k}: finite samples",
            )
        elapsed = backend.time - t_before
        _check(
            abs(elapsed - periods * period) <= 0.5 * period,
            f"advance: {periods} periods take {periods * period:g} s, took {elapsed:g} s",
        )
        drift = np.linalg.norm(backend.observe().load_p - state.load_p)
        _check(drift < 0.1, f"hover plans keep the load in place (moved {drift:.3f} m)")
        health = backend.health()
        _check(isinstance(health, BackendHealth) and health.ok, f"healthy: {health}")
        passed.append("send-advance-health")

        state = backend.observe()
        try:
            backend.send(n, hover_plan(state.t, state.uav_p[0]))
            raise AssertionError(
                "backend conformance: send to a quadrotor index out of range raises IndexError"
            )
        except IndexError:
            pass
        good = hover_plan(state.t, state.uav_p[0])
        bad_p = good.p.copy()
        bad_p[3] = np.nan
        malformed = UavTrajectory(good.t, bad_p, good.v, good.a, good.j, good.body_rates)
        rejected_before = backend.health().rejected_plans
        refused_at_send = False
        try:
            backend.send(0, malformed)
        except ValueError:
            refused_at_send = True
        for i in range(1, n):
            backend.send(i, hover_plan(state.t, state.uav_p[i]))
        backend.advance()  # the malformed plan is the latest one for a whole period
        _fly(backend, 2)
        counted = backend.health().rejected_plans > rejected_before
        _check(
            refused_at_send or counted,
            "a malformed plan is refused (ValueError at send, or counted in health().rejected_plans)",
        )
        _finite_state(backend.observe(), n, "after a malformed plan")
        passed.append("malformed-plan-refused")
        first = flown
    finally:
        backend.close()
    passed.append("close")

    if deterministic is None:
        deterministic = bool(getattr(backend, "deterministic", False))
    if deterministic:
        again = factory()
        try:
            again.reset(scenario)
            second = _fly(again, periods)
        finally:
            again.close()
        for a, b in zip(first, second, strict=True):
            for name in WorldSamples.FIELDS:
                _check(
                    np.array_equal(getattr(a, name), getattr(b, name)),
                    f"same scenario, same samples ({name} differs)",
                )
        passed.append("same-seed-same-result")
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--pilot-queue", default="stock", choices=["stock", "replace"])
    args = parser.parse_args(argv)
    from backends import make_backend
    from cableload_sim.params import load_config

    config = load_config()
    options = {"pilot_queue": args.pilot_queue} if args.backend == "gazebo" else {}
    scenario = Scenario(load_p=np.array([0.5, -0.2, 1.2]), load_q=np.array([1.0, 0, 0, 0]))
    try:
        passed = check_backend(lambda: make_backend(args.backend, config, **options), scenario)
    except AssertionError as err:
        print(json.dumps({"backend": args.backend, "failed": str(err)}))
        return 1
    print(json.dumps({"backend": args.backend, "passed": passed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
