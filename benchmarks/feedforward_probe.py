"""What of the teacher a decentralized planner can learn from the reference alone: a linear
feed-forward correction of the follow formation, fitted to the teacher's plans.

    .venv/bin/python benchmarks/feedforward_probe.py [--uavs 3] [--train-seed 9999]
        [--train-count 64] [--seed 4242] [--count 12] [--ridge 1000] [--cutoff-hz 0.3]
        [--set TABLE.KEY=VALUE ...]

1. The teacher flies ``--train-count`` draws of the generalists' distribution (seed
   ``--train-seed``, 20 s, the default config). At every decision, each quadrotor's features
   are what its student would encode of the reference and of its prior (``StudentPlanner``'s
   ``ref`` and the prior's p, v, a over the horizon, in the load-yaw frame), and its label is
   the teacher's plan less the follow formation's (p, v, a on the 21 nodes), low-passed along
   the flight at ``--cutoff-hz`` (zero phase; 0: as planned) and turned into the same frame.
   The first 3 s of each flight are left out.
2. A ridge regression (penalty ``--ridge`` on standardized features) maps features to labels.
3. The follow formation, the teacher, and the follow formation plus the regression's
   prediction (each quadrotor from its own features: decentralized) fly ``--count`` other
   draws (seed ``--seed``), with ``--set`` applied to the flights (e.g. ``link.enabled=true``,
   ``sensing.enabled=true``). Prints each one's median position (mm) and orientation (deg)
   RMSE, the smallest distance between two quadrotors, and each draw's position RMSE.
   ``--level-only-deg X``: no correction while the reference tilts the load by more than X
   degrees anywhere on the horizon (a pose-to-pose move with roll or pitch goals).

Choose the ridge and the cutoff on draws of a seed that neither the fit nor the final figures
use. The labels' collection is cached under ``runs/feedforward_probe/`` by its arguments.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from compare_planners import heldout_cases

from backends import make_backend
from backends.runner import run_episode
from cableload_sim.horizon import N_NODES
from cableload_sim.params import load_config
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.trajectories import make_reference
from planners import make_planner
from planners.student import StudentPlanner

DISTRIBUTION = Path(__file__).resolve().parents[1] / "learners" / "configs" / "generalist.toml"
CACHE = Path(__file__).resolve().parents[1] / "runs" / "feedforward_probe"
SKIP_DECISIONS = 30
"""Decisions (3 s) left out at each flight's start, where it joins the reference."""
PERIOD_S = 0.1


def _no_policy(*_):
    raise RuntimeError("the probe only encodes observations")


def _encoder(config) -> StudentPlanner:
    return StudentPlanner.from_config(
        config, _no_policy, 8, frame="load-yaw", prior="formation-follow", prior_converge_s=0.3
    )


def _features(encoded) -> np.ndarray:
    return np.concatenate([encoded.ref.ravel(), encoded.prior[..., :9].ravel()])


def collect(task) -> tuple[np.ndarray, np.ndarray]:
    """One teacher flight's (features, labels) rows, one per quadrotor and decision."""
    uavs, spec, cutoff_hz = task
    from scipy.signal import butter, filtfilt

    config = load_config(uavs=uavs)
    encoder = _encoder(config)
    teacher, follow = make_planner("teacher", config), make_planner("formation-follow", config)
    rows: list[tuple] = []

    class Recorder:
        name = "teacher"

        def reset(self):
            teacher.reset(), encoder.reset(), follow.reset()

        def report(self):
            return {}

        def plan(self, state, reference):
            encoded = encoder.observe(state, reference)
            plans, slots = teacher.plan(state, reference), follow.plan(state, reference)
            rows.append(
                (
                    [_features(e) for e in encoded],
                    [e.axes for e in encoded],
                    [np.stack([a.p - b.p, a.v - b.v, a.a - b.a]) for a, b in zip(plans, slots)],
                )
            )
            return plans

    reference = make_reference(spec[0], orientation=spec[1], **spec[2])
    run_episode(make_backend("embedded", config), Recorder(), reference, 20.0)
    features = np.array([r[0] for r in rows])  # (decisions, n, F)
    axes = np.array([r[1] for r in rows])  # (decisions, n, 3, 3)
    added = np.array([r[2] for r in rows])  # (decisions, n, 3, nodes, 3), world
    if cutoff_hz > 0.0 and len(rows) > 3 * SKIP_DECISIONS:
        b, a = butter(2, cutoff_hz / (0.5 / PERIOD_S))
        added = filtfilt(b, a, added, axis=0)
    framed = np.einsum("tnmkj,tnjc->tnmkc", added, axes)[SKIP_DECISIONS:]
    features = features[SKIP_DECISIONS:]
    return features.reshape(-1, features.shape[-1]), framed.reshape(framed.shape[0] * uavs, -1)


class FeedForward:
    """The follow formation plus the regression's correction, per quadrotor."""

    name = "feed-forward"

    def __init__(self, config, model, level_only_deg: float = 0.0):
        self.encoder, self.follow = _encoder(config), make_planner("formation-follow", config)
        self.weights, self.mean, self.scale, self.offset = model
        self.level_only_deg = level_only_deg

    def reset(self):
        self.encoder.reset()
        self.follow.reset()

    def report(self):
        return {}

    def plan(self, state, reference):
        encoded = self.encoder.observe(state, reference)
        slots = self.follow.plan(state, reference)
        if self.level_only_deg > 0.0:
            q = reference.sample(slots[0].t).q
            tilt = np.degrees(np.arccos(np.clip(1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2), -1.0, 1.0)))
            if tilt.max() > self.level_only_deg:
                return slots
        out = []
        for e, slot in zip(encoded, slots):
            if not e.is_finite():
                out.append(slot)
                continue
            framed = ((_features(e) - self.mean) / self.scale) @ self.weights + self.offset
            p, v, a = framed.reshape(3, N_NODES, 3) @ e.axes.T
            out.append(UavTrajectory(slot.t, slot.p + p, slot.v + v, slot.a + a, slot.j, slot.body_rates))
        return out


def fly(task) -> dict:
    uavs, spec, overrides, model, level_only_deg = task
    config = load_config(uavs=uavs, overrides=overrides)
    reference = make_reference(spec[0], orientation=spec[1], **spec[2])
    out = {}
    for name, planner in (
        ("formation-follow", make_planner("formation-follow", config)),
        ("teacher", make_planner("teacher", config)),
        ("feed-forward", FeedForward(config, model, level_only_deg)),
    ):
        m = run_episode(make_backend("embedded", config), planner, reference, 20.0).metrics
        done = m["status"] == "completed"
        out[name] = (
            m["rmse_position_m"] * 1e3 if done else np.inf,
            m["rmse_orientation_deg"] if done else np.inf,
            m["min_uav_distance_m"],
        )
    return out


def fit(uavs: int, seed: int, count: int, cutoff_hz: float, ridge: float):
    path = CACHE / f"n{uavs}-seed{seed}-count{count}-cutoff{cutoff_hz:g}.pkl"
    if path.is_file():
        with path.open("rb") as f:
            X, Y = pickle.load(f)
    else:
        config = load_config(uavs=uavs)
        specs = heldout_cases(f"{DISTRIBUTION}:{seed}:{count}", config, 20.0).values()
        with ProcessPoolExecutor(2) as pool:
            parts = list(pool.map(collect, [(uavs, s, cutoff_hz) for s in specs]))
        X = np.concatenate([p[0] for p in parts])
        Y = np.concatenate([p[1] for p in parts])
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            pickle.dump((X, Y), f)
    mean, scale = X.mean(axis=0), X.std(axis=0) + 1e-6
    A = (X - mean) / scale
    offset = Y.mean(axis=0)
    weights = np.linalg.solve(A.T @ A + ridge * np.eye(A.shape[1]), A.T @ (Y - offset))
    return weights, mean, scale, offset


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uavs", type=int, default=3)
    parser.add_argument("--train-seed", type=int, default=9999)
    parser.add_argument("--train-count", type=int, default=64)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--ridge", type=float, default=1000.0)
    parser.add_argument("--cutoff-hz", type=float, default=0.3)
    parser.add_argument(
        "--level-only-deg",
        type=float,
        default=0.0,
        help="no correction while the reference tilts the load beyond this anywhere on the horizon",
    )
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    args = parser.parse_args(argv)
    if args.seed == args.train_seed:
        raise SystemExit(f"--seed: expected a seed other than --train-seed ({args.train_seed})")
    if not (args.ridge > 0.0 and 0.0 <= args.cutoff_hz < 0.5 / PERIOD_S):
        raise SystemExit(
            f"expected --ridge > 0 and --cutoff-hz in [0, 5), got {args.ridge}, {args.cutoff_hz}"
        )
    model = fit(args.uavs, args.train_seed, args.train_count, args.cutoff_hz, args.ridge)
    specs = heldout_cases(f"{DISTRIBUTION}:{args.seed}:{args.count}", load_config(uavs=args.uavs), 20.0)
    with ProcessPoolExecutor(2) as pool:
        tasks = [(args.uavs, s, tuple(args.set), model, args.level_only_deg) for s in specs.values()]
        results = list(pool.map(fly, tasks))
    print(
        f"{args.uavs} quadrotors, {args.count} draws of seed {args.seed}; fit on {args.train_count} "
        f"of seed {args.train_seed}, ridge {args.ridge:g}, cutoff {args.cutoff_hz:g} Hz"
    )
    print("| planner | median pos (mm) | median orient (deg) | min distance (m) | pos per draw (mm) |")
    print("|---|---|---|---|---|")
    for name in results[0]:
        pos = [r[name][0] for r in results]
        att = [r[name][1] for r in results]
        closest = min(r[name][2] for r in results)
        draws = " ".join(f"{p:.1f}" for p in pos)
        print(f"| {name} | {np.median(pos):.2f} | {np.median(att):.3f} | {closest:.2f} | {draws} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
