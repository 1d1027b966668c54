"""DAgger: train the student to imitate the teacher's whole planned trajectories.

Round k of K: episodes are flown where each 10 Hz decision comes from the student with
probability ``beta_k = k / (K - 1)`` (the teacher in the first round, the student in the last),
else from the teacher; the teacher plans at every decision anyway and labels every visited state
with its plan for each quadrotor; the samples join one aggregated dataset; the network trains
for a fixed number of epochs on all of it. The last rounds add a random wrench on the load.

Episodes run in worker processes through an ``Executor`` (local processes by default, a Ray
cluster when asked). Every round's shard and checkpoint is written atomically (``RunStore``) so
``train(..., resume=True)`` continues an interrupted run with nothing lost or collected twice.
Everything random is drawn from generators seeded by the run's seed, the round and the episode.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from cableload_sim.errors import CableloadError, OutputExistsError, ResourceError, UsageError
from cableload_sim.horizon import N_NODES, node_offsets
from cableload_sim.io.files import atomic_write_bytes
from cableload_sim.io.resources import available_memory, gigabytes
from learners.config import TrainConfig, check_references_flyable, trajectory_specs, validate
from learners.distribution import ReferenceSpec
from learners.export import checkpoint_bytes, export_policy, load_checkpoint, network_policy
from learners.network import StudentNet
from learners.store import RunStore, Samples
from planners.student import (
    EGO_FEATURES,
    LOAD_FEATURES,
    PRIOR_FEATURES,
    REF_FEATURES,
    Policy,
    StudentPlanner,
)


class TrainingDiverged(CableloadError):
    """The training loss or the weights stopped being finite; nothing is saved or exported."""


# ---------------------------------------------------------------------------------------------
# Collecting episodes (runs in worker processes)


class DaggerPlanner:
    """Plans with the student (probability beta per decision) or the teacher, and records,
    for every quadrotor at every decision, the student's encoded observation and the teacher's
    plan for it."""

    name = "dagger"

    def __init__(
        self,
        teacher,
        student: StudentPlanner,
        beta: float,
        rng: np.random.Generator,
        record_within: float = 1.0,
        truth=None,
    ):
        self.record_within = record_within
        self.truth = truth
        """None, or a callable giving the true ``WorldState`` now: the teacher then plans (and
        labels) from it while the student sees what the planners observe (noise and all)."""
        self.teacher = teacher
        self.student = student
        self.beta = beta
        self.rng = rng
        self.records: list[tuple] = []
        self.student_decisions = 0

    def reset(self) -> None:
        self.teacher.reset()
        self.student.reset()
        self.records = []
        self.student_decisions = 0

    def report(self) -> dict:
        return {**self.teacher.report(), "student_decisions": self.student_decisions}

    def plan(self, state, reference):
        encoded = self.student.observe(state, reference)
        labels = self.teacher.plan(state if self.truth is None else self.truth(), reference)
        # far from the reference the run is failing: its labels are rescue manoeuvres, outliers
        # that would swamp the loss
        near = np.linalg.norm(state.load_p - reference.sample(state.t).p[0]) < self.record_within
        for i, (e, label) in enumerate(zip(encoded, labels)):
            if near and e.is_finite() and label.is_finite():
                target = np.hstack(
                    [
                        e.to_frame(label.p - e.origin),
                        e.to_frame(label.body_rates),
                        e.to_frame(label.v),
                        e.to_frame(label.a),
                    ]
                )
                self.records.append((e.ego, e.load, e.ref, e.prior, target, state.t, i))
        if self.beta > 0.0 and self.rng.random() < self.beta:
            self.student_decisions += 1
            # the teacher's plan is not flown: its next label must start from what is, not
            # from the cable rates, tensions and load motion its own plan predicted
            not_flown = getattr(self.teacher, "not_flown", None)
            if not_flown is not None:
                not_flown()
            return self.student.act(encoded, state.uav_p)
        return labels

    def arrays(self, episode: int) -> dict:
        if not self.records:
            raise RuntimeError("the episode recorded no sample")
        ego, load, ref, prior, target, t, quad = zip(*self.records)
        return {
            "ego": np.asarray(ego, dtype=np.float32),
            "load": np.asarray(load, dtype=np.float32),
            "ref": np.asarray(ref, dtype=np.float32),
            "prior": np.asarray(prior, dtype=np.float32),
            "target": np.asarray(target, dtype=np.float32),
            "t": np.asarray(t),
            "quad": np.asarray(quad, dtype=np.int16),
            "episode": np.full(len(t), episode, dtype=np.int32),
        }


@dataclass(frozen=True)
class EpisodeTask:
    """One episode to collect, self-contained so it can travel to any worker."""

    config: dict  # resolved training config
    system_config: str
    round_index: int
    episode: int
    beta: float
    trajectory: str
    orientation: str
    disturbance: tuple[float, float] | None
    policy: bytes | None  # checkpoint bytes of the current student, None before training
    seed: int
    options: dict | None = None
    """Options of the reference (``make_reference``), e.g. of a drawn one."""
    uavs: int | None = None
    """Number of quadrotors (None: the system config's)."""
    overrides: tuple[str, ...] = ()
    """``table.key=value`` changes to the system config."""
    mismatch: dict | None = None
    """``MismatchParams`` of the simulated system (what planners are not told)."""


_WORKER_CACHE: dict = {}


def _system_config(path: str, uavs: int | None = None, overrides: tuple[str, ...] = ()):
    from cableload_sim.params import load_config

    key = ("system", path, uavs, tuple(overrides))
    if key not in _WORKER_CACHE:
        _WORKER_CACHE[key] = load_config(path, uavs=uavs, overrides=tuple(overrides))
    return _WORKER_CACHE[key]


def _teacher(system_path: str, uavs: int | None = None, overrides: tuple[str, ...] = ()):
    from planners.teacher import TeacherPlanner

    key = ("teacher", system_path, uavs, tuple(overrides))
    if key not in _WORKER_CACHE:
        _WORKER_CACHE[key] = TeacherPlanner.from_config(_system_config(system_path, uavs, overrides))
    return _WORKER_CACHE[key]


def _with_mismatch(config, mismatch: dict | None):
    """``config`` whose simulated system differs from the nominal one by ``mismatch``."""
    if not mismatch:
        return config
    from cableload_sim.params import MismatchParams

    params = MismatchParams(
        load_mass_scale=float(mismatch["load_mass_scale"]),
        attachment_offsets=cast(
            "tuple[tuple[float, float, float], ...]",  # rows of three (MismatchParams checks them)
            tuple(tuple(map(float, row)) for row in mismatch["attachment_offsets"]),
        ),
        cable_length_deltas=tuple(map(float, mismatch["cable_length_deltas"])),
    )
    return dataclasses.replace(config, mismatch=params)


MISMATCH_DRAWS = 50
"""Draws of a perturbed system before giving up on finding one that can hover."""


def draw_mismatch(d, n: int, rng: np.random.Generator, flyable=None) -> dict:
    """A perturbed system as the paper's Table 10 flew them: heavier load, shifted attachment
    points, cables of other lengths, within the ``dagger.perturb_*`` bounds. ``flyable``
    (mismatch -> bool): draws it refuses are drawn again (six cables of 1 m shortened by 1 cm
    cannot reach the formation's 1.2 m spacing: no hover to start from)."""
    for _ in range(MISMATCH_DRAWS):
        mismatch = {
            "load_mass_scale": float(rng.uniform(1.0, d.perturb_load_mass)),
            "attachment_offsets": rng.uniform(-d.perturb_attachment_m, d.perturb_attachment_m, (n, 3))
            .round(4)
            .tolist(),
            "cable_length_deltas": rng.uniform(-d.perturb_cable_m, d.perturb_cable_m, n).round(4).tolist(),
        }
        if flyable is None or flyable(mismatch):
            return mismatch
    raise UsageError(
        f"dagger.perturb_*: none of {MISMATCH_DRAWS} perturbed systems of {n} "
        "quadrotors can hover; expected smaller perturb_load_mass, "
        "perturb_attachment_m or perturb_cable_m"
    )


def hover_possible(config, mismatch: dict) -> bool:
    """Whether ``config``'s system perturbed by ``mismatch`` has a hover to start from."""
    from cableload_sim.physics.feasibility import check_hover

    try:
        check_hover(_with_mismatch(config, mismatch))
    except UsageError:
        return False
    return True


def collect_episode(task: EpisodeTask) -> dict:
    """Fly one DAgger episode; returns its samples and figures."""
    from backends.base import Scenario
    from backends.embedded import EmbeddedBackend
    from backends.runner import run_episode
    from cableload_sim.physics.disturbances import WrenchDisturbance
    from cableload_sim.trajectories import make_reference
    from learners.export import network_from_checkpoint, read_checkpoint

    torch.set_num_threads(1)
    start = time.perf_counter()
    nominal = _system_config(task.system_config, task.uavs, task.overrides)
    config = _with_mismatch(nominal, task.mismatch)
    history = task.config["network"]["history"]
    policy: Policy
    if task.policy is not None:
        data = read_checkpoint(task.policy, f"round {task.round_index} policy")
        policy = network_policy(network_from_checkpoint(data, f"round {task.round_index} policy"))
    else:
        policy = _never_called
    student = StudentPlanner.from_config(
        config,
        policy,
        history,
        frame=task.config["network"]["frame"],
        prior=task.config["network"]["prior"],
        prior_converge_s=task.config["network"]["prior_converge_s"],
        error_inputs=task.config["network"].get("error_inputs", False),
        prior_from_state=task.config["network"].get("prior_from_state", False),
    )
    rng = np.random.default_rng(task.seed)
    backend = EmbeddedBackend(config)
    sees_truth = task.config["dagger"].get("teacher_sees_truth", True) and config.sensing.enabled
    planner = DaggerPlanner(
        _teacher(task.system_config, task.uavs, task.overrides),
        student,
        task.beta,
        rng,
        truth=backend.sim.world_state if sees_truth else None,
    )
    reference = make_reference(task.trajectory, orientation=task.orientation, **(task.options or {}))
    p0, q0 = reference.start_pose()
    jitter = task.config["dagger"]["start_jitter_m"]
    p0 = p0 + rng.uniform(-jitter, jitter, size=3)
    disturbance = WrenchDisturbance(*task.disturbance) if task.disturbance else None
    scenario = Scenario(load_p=p0, load_q=q0, seed=task.seed, disturbance=disturbance)
    result = run_episode(
        backend,
        planner,
        reference,
        task.config["dagger"]["episode_s"],
        scenario,
        collision_distance=config.simulation.collision_distance_m,
        divergence_distance=config.simulation.divergence_distance_m,
    )
    arrays = planner.arrays(task.episode)
    return {
        "arrays": arrays,
        "status": result.status.value,
        "reference": f"{task.trajectory} ({task.orientation})",
        "uavs": config.system.n_uavs,
        "perturbed": bool(task.mismatch),
        "rmse_position_m": result.metrics["rmse_position_m"],
        "student_decisions": planner.student_decisions,
        "wall_s": time.perf_counter() - start,
        "episode": task.episode,
    }


def _never_called(*_):
    raise RuntimeError("the student acted before it had a policy (beta > 0 in round 0)")


# ---------------------------------------------------------------------------------------------
# Executors


class LocalExecutor:
    """Worker processes on this machine (spawned, one per core by default)."""

    def __init__(self, workers: int = 0):
        self.workers = workers or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, tasks: list) -> list:
        if self.workers == 1:
            return [fn(task) for task in tasks]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=get_context("spawn"))
        return list(self._pool.map(fn, tasks))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor:
    """Episodes as Ray tasks, on a local Ray instance or the cluster at ``address``."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            import ray
        except ImportError as err:
            raise CableloadError("the ray executor needs Ray: pip install 'cableload[cluster]'") from err
        self.ray = ray
        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(
                    num_cpus=num_cpus, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False
                )
        self._remote: dict[Callable, Any] = {}  # ray remote functions

    def map(self, fn: Callable, tasks: list) -> list:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self.ray.remote(fn)
        return self.ray.get([remote.remote(task) for task in tasks])

    def close(self) -> None:
        pass


def make_executor(name: str, workers: int = 0, address: str | None = None):
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(address, num_cpus=workers or None)
    raise ValueError(f"executor: expected 'local' or 'ray', got {name!r}")


# ---------------------------------------------------------------------------------------------
# Training


def betas(rounds: int, beta_max: float = 1.0) -> np.ndarray:
    """Probability that the student acts, per round: 0 in the first, ``beta_max`` in the
    last."""
    return np.linspace(0.0, beta_max, rounds) if rounds > 1 else np.zeros(1)


class WeightAverage:
    """An exponential moving average of a network's weights (``training.ema``), updated after
    every optimizer step. The decay ramps up as ``(1 + s) / (10 + s)`` over the first steps
    ``s`` so the average is not held at the initial weights; buffers (the normalization) are
    copied. With decay 0 the average is the network itself."""

    def __init__(self, net: StudentNet, decay: float, steps: int = 0):
        self.decay = decay
        self.steps = steps
        self.net = net
        self.average = copy.deepcopy(net) if decay > 0 else net

    def update(self) -> None:
        self.steps += 1
        if self.average is self.net:
            return
        d = min(self.decay, (1.0 + self.steps) / (10.0 + self.steps))
        with torch.no_grad():
            for mine, theirs in zip(self.average.parameters(), self.net.parameters()):
                mine.mul_(d).add_(theirs, alpha=1.0 - d)

    def sync_buffers(self) -> None:
        """Copy the buffers (normalization statistics) from the trained network."""
        if self.average is not self.net:
            with torch.no_grad():
                for mine, theirs in zip(self.average.buffers(), self.net.buffers()):
                    mine.copy_(theirs)


def prior_targets(prior: np.ndarray) -> np.ndarray:
    """The prior laid out as the targets: p, w, v, a per node."""
    return np.concatenate([prior[..., 0:3], prior[..., 12:15], prior[..., 3:6], prior[..., 6:9]], axis=-1)


def data_stats(data: dict, residual: bool = True, floor_scale: float = 1.0) -> dict:
    """Normalization statistics of inputs and outputs (numpy), from a dataset; with
    ``residual`` the outputs' are those of the teacher's plans less the prior's."""

    def stats(x, floor):
        flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
        return flat.mean(axis=0), np.maximum(flat.std(axis=0), floor)

    out = {}
    for name in ("ego", "load", "ref"):
        # an input that barely varies in the data (attitudes while level) must not be blown up:
        # away from the data it would dominate everything
        floor = np.full(data[name].shape[-1], INPUT_STD_FLOOR)
        if name == "load":  # the error columns (``error_inputs``) are millimetres
            floor[LOAD_FEATURES:] = ERROR_STD_FLOOR
        out[f"{name}_mean"], out[f"{name}_std"] = stats(data[name], floor)
    out["prior_mean"], out["prior_std"] = stats(data["prior"][..., :9], INPUT_STD_FLOOR)
    target = data["target"] - prior_targets(data["prior"]) if residual else data["target"]
    out["out_mean"], out["out_std"] = stats(target, 1e-3)
    # floors: an output that hardly varies (the teacher's zero yaw rate) must not weigh more
    out["out_std"] = np.maximum(out["out_std"], floor_scale * OUTPUT_STD_FLOOR)
    return out


INPUT_STD_FLOOR = 0.1
"""Smallest scale of any input feature (m, m/s, rad/s or rotation-matrix entries)."""

ERROR_STD_FLOOR = 1e-3
"""Smallest scale of the error inputs (``planners.student.ERROR_FEATURES``: m, rad, m/s)."""

OUTPUT_STD_FLOOR = np.array([0.05] * 3 + [0.5] * 3 + [0.2] * 3 + [1.0] * 3)
"""Smallest scales of p (m), w (rad/s), v (m/s), a (m/s^2) in the loss."""


def loss_terms(
    out: dict,
    target: torch.Tensor,
    std: torch.Tensor,
    huber: bool = True,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean losses of the normalized errors of p, w, v, a (4,): squared, or Huber (quadratic
    below one standard deviation, linear above, so the rare labels of wild states do not
    swamp the rest); ``weights`` (nodes,), mean 1, weigh the horizon's nodes."""
    prediction = torch.cat([out["p"], out["w"], out["v"], out["a"]], dim=-1)
    error = (prediction - target) / std
    if huber:
        loss = 2.0 * nn.functional.huber_loss(error, torch.zeros_like(error), reduction="none", delta=1.0)
    else:
        loss = error**2
    if weights is not None:
        loss = loss * weights[:, None]
    return torch.stack([loss[..., 3 * k : 3 * k + 3].mean() for k in range(4)])


def node_weights(nodes: torch.Tensor, horizon_s: float) -> torch.Tensor | None:
    """Weights of the horizon's nodes ``nodes`` in the loss: ``exp(-t / horizon_s)`` at each
    node's time t, scaled to mean 1 over them (None for ``horizon_s`` 0: uniform). A plan is
    flown for a planner period or two before the next replaces it: its first nodes are what
    the flight feels, while the teacher's far nodes vary with what the student cannot see."""
    if horizon_s <= 0.0:
        return None
    times = torch.as_tensor(node_offsets(), dtype=torch.float32)[nodes]
    weights = torch.exp(-times / horizon_s)
    return weights / weights.mean()


def train_epochs(
    net: StudentNet,
    optimizer,
    data,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    progress=None,
    nodes: int = N_NODES,
    after_step: Callable[[], None] | None = None,
    weight_s: float = 0.0,
) -> float:
    """Train ``epochs`` passes over ``data`` (``learners.store.Samples``, streamed a batch at
    a time, or a dict of arrays), each batch's loss on ``nodes`` random horizon nodes
    (``after_step`` is called after each optimizer step; ``weight_s``: ``node_weights``);
    returns the last epoch's mean loss."""
    samples = data if isinstance(data, Samples) else Samples([data])
    std = net.out_std
    n = len(samples)
    last = float("nan")
    net.train()
    for epoch in range(epochs):
        order = torch.randperm(n, generator=generator)
        total, count = 0.0, 0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size].numpy()
            batch = {name: torch.as_tensor(value) for name, value in samples.gather(idx).items()}
            chosen = torch.sort(torch.randperm(batch["target"].shape[1], generator=generator)[:nodes])[0]
            out = net.predict(
                batch["ego"], batch["load"], batch["ref"], batch["prior"], nodes=chosen, with_jerk=False
            )
            loss = loss_terms(
                out, batch["target"][:, chosen], std, weights=node_weights(chosen, weight_s)
            ).sum()
            value = loss.item()
            if not np.isfinite(value):
                rate = optimizer.param_groups[0]["lr"]
                raise TrainingDiverged(
                    f"the training loss became {value} (epoch {epoch}, batch "
                    f"{start // batch_size}, learning rate {rate:g}); lower "
                    "training.learning_rate"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if after_step is not None:
                after_step()
            total += value * len(idx)
            count += len(idx)
        last = total / max(count, 1)
        if progress is not None:
            progress.update(1)
            progress.set_postfix(loss=f"{last:.4f}")
    net.eval()
    check_finite_weights(net)
    return last


def check_finite_weights(net: StudentNet) -> None:
    """Refuse (``TrainingDiverged``) a network with a non-finite weight or normalization."""
    for name, tensor in list(net.named_parameters()) + list(net.named_buffers()):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise TrainingDiverged(f"network weight {name!r} is not finite; lower training.learning_rate")


RECORD_BYTES_PER_NODE = 4 * (REF_FEATURES + PRIOR_FEATURES + 4 * 3)
"""Bytes of one labelled sample per horizon node: float32 reference, prior and target (p, w,
v, a)."""


def dataset_bytes(config: TrainConfig, n_uavs: int, planner_rate_hz: float) -> float:
    """Bytes of the aggregated dataset after the last round: every quadrotor labelled at every
    decision of every episode (what training holds in memory)."""
    history = config.network.history
    per_sample = 4 * history * (EGO_FEATURES + config.network.load_width) + N_NODES * RECORD_BYTES_PER_NODE
    d = config.dagger
    decisions = d.rounds * d.episodes_per_round * d.episode_s * planner_rate_hz
    return decisions * n_uavs * per_sample


def _check_dataset_fits(config: TrainConfig, system_config) -> None:
    needed = 2.0 * dataset_bytes(
        config, system_config.system.n_uavs, system_config.simulation.planner_rate_hz
    )
    available = available_memory()
    if available is not None and needed > available:
        raise ResourceError(
            f"training on {config.dagger.rounds} rounds of {config.dagger.episodes_per_round} "
            f"episodes of {config.dagger.episode_s:g} s needs about {gigabytes(needed)} of "
            f"memory for the dataset, {gigabytes(available)} are available; expected shorter "
            "or fewer episodes"
        )


def _episode_plan(config: TrainConfig, round_index: int, episode: int, rng, system_config) -> ReferenceSpec:
    """The reference of one episode, for ``system_config`` (its number of quadrotors)."""
    d = config.dagger
    if config.references is not None:
        return config.references.draw(rng, system_config, d.episode_s)
    specs = trajectory_specs(d)
    if d.trajectory_order == "alternate":
        name, own, options = specs[(round_index * d.episodes_per_round + episode) % len(specs)]
    else:
        name, own, options = specs[int(rng.integers(len(specs)))]
    orientation = own or d.orientation
    if orientation == "both":
        orientation = ("constant", "zero-sideslip")[int(rng.integers(2))]
    return ReferenceSpec(name, orientation, options)


def training_system(config: TrainConfig, uavs: int | None = None):
    """The nominal system config training flies (with ``dagger.system_overrides``)."""
    return _system_config(config.system_config, uavs, config.dagger.system_overrides)


def validation_references(config: TrainConfig) -> list[tuple[ReferenceSpec, int | None]]:
    """What the student-only evaluation after each round flies, with its number of
    quadrotors: held-out draws of the distribution (``dagger.validation_seed``), cycling over
    ``dagger.uavs``, or the first named trajectory."""
    d = config.dagger
    counts: list[int | None] = list(d.uavs) or [None]
    if config.references is not None:
        rng = np.random.default_rng(d.validation_seed)
        out: list[tuple[ReferenceSpec, int | None]] = []
        for e in range(d.validation_episodes):
            n = counts[e % len(counts)]
            out.append((config.references.draw(rng, training_system(config, n), d.eval_s), n))
        return out
    name, own, options = trajectory_specs(d)[0]
    orientation = own or ("constant" if d.orientation == "both" else d.orientation)
    return [(ReferenceSpec(name, orientation, options), n) for n in counts]


@dataclass(frozen=True)
class EvaluationTask:
    """One validation flight of the student alone, for a worker process."""

    system_config: str
    uavs: int | None
    overrides: tuple[str, ...]
    reference: dict  # ReferenceSpec.as_dict()
    duration_s: float
    policy: bytes  # checkpoint_bytes of the network
    hover_calibration: bool


def evaluate_episode(task: EvaluationTask) -> tuple[float, float, str]:
    """Fly one validation reference with the student alone: (position RMSE, orientation
    RMSE, status)."""
    from backends import make_backend
    from backends.runner import run_episode
    from learners.export import network_from_checkpoint, read_checkpoint

    torch.set_num_threads(1)
    net = network_from_checkpoint(read_checkpoint(task.policy, "validation policy"), "validation policy")
    system_config = _system_config(task.system_config, task.uavs, task.overrides)
    student = StudentPlanner.from_config(
        system_config,
        network_policy(net),
        net.config.history,
        frame=net.config.frame,
        prior=net.config.prior,
        prior_converge_s=net.config.prior_converge_s,
        hover_calibration=task.hover_calibration,
        error_inputs=net.config.error_inputs,
        prior_from_state=net.config.prior_from_state,
    )
    result = run_episode(
        make_backend("embedded", system_config),
        student,
        ReferenceSpec.from_dict(task.reference).build(),
        task.duration_s,
        collision_distance=system_config.simulation.collision_distance_m,
        divergence_distance=system_config.simulation.divergence_distance_m,
    )
    return (
        float(result.metrics["rmse_position_m"]),
        float(result.metrics["rmse_orientation_deg"]),
        result.status.value,
    )


def _evaluate(
    net: StudentNet,
    config: TrainConfig,
    references: list[tuple[ReferenceSpec, int | None]],
    hover_calibration: bool = False,
    pool=None,
) -> dict:
    """The student alone on each validation reference: mean RMSE, worst status. DAgger flies
    the raw network; ``hover_calibration`` subtracts its hover residual as a flown policy of the
    load-yaw frame may (``StudentPlanner.hover_residual``). The flights run in ``pool``'s
    workers (an executor), else here, one after the other."""
    d = config.dagger
    policy = checkpoint_bytes(net)
    tasks = [
        EvaluationTask(
            system_config=config.system_config,
            uavs=n,
            overrides=d.system_overrides,
            reference=spec.as_dict(),
            duration_s=d.eval_s,
            policy=policy,
            hover_calibration=hover_calibration,
        )
        for spec, n in references
    ]
    flown = pool.map(evaluate_episode, tasks) if pool is not None else [evaluate_episode(t) for t in tasks]
    positions = [f[0] for f in flown]
    orientations = [f[1] for f in flown]
    statuses = [f[2] for f in flown]
    failed = [status for status in statuses if status != "completed"]
    return {
        "eval_rmse_position_m": float(np.mean(positions)),
        "eval_rmse_orientation_deg": float(np.mean(orientations)),
        "eval_status": failed[0] if failed else "completed",
        "eval_completed": len(statuses) - len(failed),
    }


def learning_rate(config: TrainConfig, round_index: int) -> float:
    t = config.training
    rounds = config.dagger.rounds
    fraction = round_index / (rounds - 1) if rounds > 1 else 1.0
    return t.learning_rate * (t.learning_rate_final / t.learning_rate) ** fraction


def train(
    config: TrainConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    executor: str = "local",
    address: str | None = None,
    progress: bool = True,
    stop_after: int | None = None,
    force: bool = False,
    warn=None,
) -> dict:
    """Run (or resume) DAgger; returns the summary. ``stop_after`` ends after that many rounds
    have completed in this call (tests). A training reference beyond what the system can fly
    is refused, or with ``force`` reported through ``warn`` (``feasibility.require_flyable``)."""
    from tqdm import tqdm

    validate(config)
    system_config = training_system(config, max(config.dagger.uavs, default=None))
    _check_dataset_fits(config, system_config)
    check_references_flyable(config, system_config, force, warn)
    if config.training.torch_threads:
        torch.set_num_threads(config.training.torch_threads)
    store = RunStore(out_dir)
    resolved = {**config.to_dict(), "system": system_config.to_dict()}
    if resume:
        stored = store.read_config()
        if stored != json.loads(json.dumps(resolved, default=float)):
            raise UsageError(
                f"{out_dir}: the stored run used another configuration; resume "
                "it with the same one or start a new directory"
            )
        done = store.completed_rounds()
    else:
        if store.completed_rounds() or store.has_shard(0):
            raise OutputExistsError(f"{out_dir} already holds a run; use --resume to continue it")
        store.write_config(resolved)
        done = []
    d = config.dagger
    torch.manual_seed(d.seed)
    net = StudentNet(config.network)
    optimizer = torch.optim.Adam(
        net.parameters(), lr=config.training.learning_rate, weight_decay=config.training.weight_decay
    )
    first = 0
    average = WeightAverage(net, config.training.ema)
    if done:
        last = done[-1]
        net, data = load_checkpoint(store.checkpoint_path(last))
        saved = net
        if "training_state_dict" in data:  # the checkpoint's network is the average
            net = copy.deepcopy(saved)
            net.load_state_dict(data["training_state_dict"])
        optimizer = torch.optim.Adam(
            net.parameters(), lr=config.training.learning_rate, weight_decay=config.training.weight_decay
        )
        optimizer.load_state_dict(data["optimizer"])
        average = WeightAverage(net, config.training.ema, steps=int(data.get("ema_steps", 0)))
        if average.average is not net:
            average.average = saved
        first = last + 1
    summary = [row for row in store.read_summary() if row["round"] < first]
    validation = validation_references(config) if d.eval_s > 0 else []
    pool = make_executor(executor, config.training.workers, address)
    beta = betas(d.rounds, d.beta_max)
    completed_now = 0
    try:
        rounds_bar = tqdm(
            range(first, d.rounds),
            desc="DAgger rounds",
            unit="round",
            disable=not progress,
            initial=first,
            total=d.rounds,
        )
        for k in rounds_bar:
            t_round = time.perf_counter()
            rng = np.random.default_rng([d.seed, k])
            if store.has_shard(k):
                collected = None  # collected before an interruption: reuse, never twice
            else:
                policy = None if k == 0 else checkpoint_bytes(average.average)
                tasks = []
                for e in range(d.episodes_per_round):
                    n = int(rng.choice(d.uavs)) if d.uavs else None
                    system = training_system(config, n)
                    spec = _episode_plan(config, k, e, rng, system)
                    # drawn only when asked for: configs without it keep their draws
                    shared = d.perturb_share > 0 and k >= 1 and bool(rng.random() < d.perturb_share)
                    perturbed = k >= d.rounds - d.perturb_rounds or shared
                    mismatch = (
                        draw_mismatch(d, system.system.n_uavs, rng, functools.partial(hover_possible, system))
                        if perturbed
                        else None
                    )
                    disturbed = k >= d.rounds - d.disturbance_rounds or shared
                    tasks.append(
                        EpisodeTask(
                            config=resolved,
                            system_config=config.system_config,
                            round_index=k,
                            episode=e,
                            beta=float(beta[k]),
                            trajectory=spec.name,
                            orientation=spec.orientation,
                            disturbance=(d.disturbance_force, d.disturbance_torque) if disturbed else None,
                            policy=policy,
                            seed=int(rng.integers(2**31)),
                            options=dict(spec.options),
                            uavs=n,
                            overrides=d.system_overrides,
                            mismatch=mismatch,
                        )
                    )
                collected = pool.map(collect_episode, tasks)
                shard = {
                    key: np.concatenate([c["arrays"][key] for c in collected])
                    for key in collected[0]["arrays"]
                }
                store.write_shard(k, shard)
            t_collect = time.perf_counter() - t_round
            round_data = store.open_shards(k)
            if k == 0 and not done:
                floor = config.training.output_floor_scale
                net.set_normalization(data_stats(store.read_shards(0), config.network.residual, floor))
                average.sync_buffers()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, k)
            generator = torch.Generator().manual_seed(d.seed * 1000 + k)
            epoch_bar = tqdm(
                total=d.epochs, desc=f"round {k} epochs", unit="epoch", leave=False, disable=not progress
            )
            try:
                loss = train_epochs(
                    net,
                    optimizer,
                    round_data,
                    d.epochs,
                    config.training.batch_size,
                    generator,
                    epoch_bar,
                    config.training.train_nodes,
                    after_step=average.update,
                    weight_s=config.training.node_weight_s,
                )
            except TrainingDiverged as err:
                raise TrainingDiverged(
                    f"{out_dir}: round {k}: {err}; no checkpoint of this round was saved and no "
                    "policy exported (start a new run directory with the changed config)"
                ) from None
            finally:
                epoch_bar.close()
            t_train = time.perf_counter() - t_round - t_collect
            row = {
                "round": k,
                "beta": float(beta[k]),
                "samples": len(round_data),
                "loss": loss,
                "collect_s": t_collect,
                "train_s": t_train,
                "episodes": [
                    {
                        k2: c[k2]
                        for k2 in (
                            "reference",
                            "uavs",
                            "perturbed",
                            "status",
                            "rmse_position_m",
                            "student_decisions",
                            "wall_s",
                        )
                    }
                    for c in collected
                ]
                if collected
                else "reused",
            }
            if d.eval_s > 0:
                t_eval = time.perf_counter()
                row.update(_evaluate(average.average, config, validation, pool=pool))
                row["eval_wall_s"] = time.perf_counter() - t_eval
            # the summary first: a round counts as done once its checkpoint exists, so a kill
            # between the two redoes the round (its row is dropped on resume), never loses it
            summary.append(row)
            store.write_summary(summary)
            save_checkpoint_with_optimizer(store, k, average, optimizer, resolved)
            rounds_bar.set_postfix(
                loss=f"{loss:.4f}", rmse=f"{row.get('eval_rmse_position_m', float('nan')):.3f}"
            )
            completed_now += 1
            if stop_after is not None and completed_now >= stop_after:
                break
        rounds_bar.close()
        if store.completed_rounds() and store.completed_rounds()[-1] == d.rounds - 1:
            chosen = select_round(summary, d.select)
            net = average.average
            if chosen != summary[-1]["round"]:
                net, _ = load_checkpoint(store.checkpoint_path(chosen))
            check_finite_weights(net)
            row = next(r for r in summary if r["round"] == chosen)
            calibration = hover_calibration_choice(net, config, validation, row, pool) if validation else {}
            export_policy(
                net,
                Path(out_dir) / "policy",
                system=system_config.system,
                info={
                    "trained_on": (list(d.trajectories) if config.references is None else "references"),
                    "orientation": d.orientation,
                    "rounds": d.rounds,
                    "epochs": d.epochs,
                    "selected_round": chosen,
                    "selection": d.select,
                    "samples": row["samples"],
                    **{k: row[k] for k in row if k.startswith("eval_")},
                    **calibration,
                },
            )
            plot_summary(summary, Path(out_dir) / "training_summary.png", chosen)
    finally:
        pool.close()
    return {"rounds": summary}


def validation_score(row: dict) -> float:
    """What ``dagger.select = "best"`` ranks completed rounds by: position RMSE / 1 cm +
    attitude RMSE / 1 deg."""
    return row["eval_rmse_position_m"] / 0.01 + row["eval_rmse_orientation_deg"] / 1.0


def hover_calibration_choice(
    net: StudentNet, config: TrainConfig, validation: list, row: dict, pool=None
) -> dict:
    """Whether the policy flies with its hover residual subtracted
    (``StudentPlanner.hover_residual``), chosen on the validation draws like the round: the
    chosen round (``row``, flown raw) flown again calibrated; calibrated only when that scores
    better. Only the load-yaw frame is offered it. Policies trained before this choice (no
    ``hover_calibration`` in ``policy.json``) are calibrated in the load-yaw frame, as then."""
    if net.config.frame != "load-yaw":
        return {"hover_calibration": False}
    calibrated = _evaluate(net, config, validation, hover_calibration=True, pool=pool)
    better = calibrated["eval_status"] == "completed" and (
        row["eval_status"] != "completed" or validation_score(calibrated) < validation_score(row)
    )
    return {
        "hover_calibration": bool(better),
        "hover_calibrated_eval": {
            k: calibrated[k] for k in ("eval_rmse_position_m", "eval_rmse_orientation_deg", "eval_status")
        },
    }


def select_round(summary: list[dict], how: str) -> int:
    """The round whose student becomes the policy (see ``DaggerConfig.select``)."""
    if how == "last" or "eval_rmse_position_m" not in summary[-1]:
        return summary[-1]["round"]

    def score(row):
        failed = row["eval_status"] != "completed"
        error = validation_score(row)
        return (failed, error if np.isfinite(error) else np.inf, -row["round"])

    return min(summary, key=score)["round"]


def save_checkpoint_with_optimizer(
    store: RunStore, k: int, average: WeightAverage, optimizer, resolved
) -> None:
    """Round ``k``'s student (the average, when there is one) with what resuming needs: the
    optimizer's state and, with an average, the raw weights and the step count."""
    extra = {"optimizer": optimizer.state_dict(), "round": k, "config": resolved, "ema_steps": average.steps}
    if average.average is not average.net:
        extra["training_state_dict"] = average.net.state_dict()
    atomic_write_bytes(store.checkpoint_path(k), checkpoint_bytes(average.average, extra))


def plot_summary(summary: list[dict], path: Path, selected: int | None = None) -> None:
    """Training loss and closed-loop evaluation RMSE per round, as a PNG; the round that became
    the policy is marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [r["round"] for r in summary]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].semilogy(rounds, [r["loss"] for r in summary], "o-")
    axes[0].set_xlabel("DAgger round")
    axes[0].set_ylabel("training loss (normalized)")
    axes[0].grid(True, alpha=0.3)
    if summary and "eval_rmse_position_m" in summary[0]:
        axes[1].plot(rounds, [r["eval_rmse_position_m"] for r in summary], "o-", label="position")
        axes[1].set_ylabel("student-only RMSE (m)")
        axes[1].set_xlabel("DAgger round")
        twin = axes[1].twinx()
        twin.plot(
            rounds, [r["eval_rmse_orientation_deg"] for r in summary], "s--", color="C1", label="orientation"
        )
        twin.set_ylabel("orientation RMSE (deg)")
        axes[1].grid(True, alpha=0.3)
        if selected is not None:
            axes[1].axvline(selected, color="k", alpha=0.4, linestyle=":", label=f"policy (round {selected})")
        lines = axes[1].get_legend_handles_labels()
        extra = twin.get_legend_handles_labels()
        axes[1].legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8, loc="upper right")
    fig.suptitle("student training")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
