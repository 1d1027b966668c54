"""Training configuration of the student (TOML): network sizes, DAgger schedule, optimizer.

```toml
system_config = "paper"           # a shipped system config (paper, paper-conditions) or a TOML file
                                  # (relative to this file)
[network]                         # learners.network.NetworkConfig
[dagger]                          # DaggerConfig
[training]                        # TrainingConfig
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from cableload_sim import checks
from cableload_sim.errors import ConfigError, UsageError
from cableload_sim.horizon import N_NODES
from cableload_sim.params.config import resolve_config
from learners.distribution import ReferenceDistribution, distribution_from_table
from learners.network import NetworkConfig

MIN_EPISODE_S = 1.0
"""Shortest DAgger or evaluation episode (s): ten planner periods."""


@dataclass(frozen=True)
class DaggerConfig:
    """The data-collection schedule (the paper's section 4.2: 20 rounds, 16 epochs)."""

    rounds: int = 20
    """DAgger rounds; beta, the probability that the student acts, rises linearly from 0 in the
    first round to ``beta_max`` in the last."""
    beta_max: float = 1.0
    """Probability that the student acts in the last round. Below 1 every round keeps some of
    the teacher's decisions: the states stay near those the teacher's labels are consistent
    with (its warm start, the other quadrotors' states), while the student's own still make
    up a share of them."""
    epochs: int = 16
    """Training epochs over the whole aggregated dataset after each round."""
    episodes_per_round: int = 2
    """Episodes collected per round (in parallel, one per worker)."""
    episode_s: float = 40.0
    """Simulated length of an episode (s)."""
    trajectories: tuple[str | dict, ...] = ("eight-medium",)
    """Load references to train on: names as on the command line, or tables naming one with
    its own orientation mode and options, e.g. ``{name = "eight", orientation =
    "zero-sideslip", ax = 2.7, ay = 2.3}`` (``trajectory_specs`` reads them)."""
    orientation: str = "constant"
    """Orientation mode of the references: constant, zero-sideslip or both."""
    trajectory_order: str = "alternate"
    """``alternate`` cycles through the trajectories episode by episode; ``sample`` draws them."""
    disturbance_rounds: int = 5
    """Last rounds with a random wrench on the load."""
    disturbance_force: float = 1.0
    """Largest disturbing force (N)."""
    disturbance_torque: float = 0.1
    """Largest disturbing torque (N m)."""
    start_jitter_m: float = 0.15
    """Each episode starts with the load up to this far from its reference's start, per axis
    (m), so no two episodes of a round are alike."""
    eval_s: float = 20.0
    """Student-only evaluation episode after each round, on the first trajectory (s); 0: none."""
    select: str = "best"
    """Which round's student becomes the policy: ``best`` (the original DAgger's choice: the
    best on validation, here the evaluation episode: completed runs first, then the smallest
    ``rmse_position_m / 1 cm + rmse_orientation_deg / 1 deg``; the last round when
    ``eval_s`` is 0) or ``last``."""
    seed: int = 0
    """Seeds everything: episode choices, disturbances, beta draws, initialization, batches."""
    uavs: tuple[int, ...] = ()
    """Numbers of quadrotors an episode is drawn with (one policy for all), e.g. [3, 4, 6];
    empty: the system config's."""
    system_overrides: tuple[str, ...] = ()
    """``table.key=value`` changes to the system config for training and evaluation (as
    ``--set`` takes them), e.g. ``"sensing.enabled=true"``, ``"link.enabled=true"``."""
    teacher_sees_truth: bool = True
    """With ``[sensing]`` on: the teacher plans and labels from the true state while the
    student observes through the sensors (a privileged teacher), so the labels are not the
    sensors' noise passed on; false: both see the sensors."""
    perturb_rounds: int = 0
    """Last rounds whose episodes each fly a system that differs from the planners' (the
    paper's Table 10, drawn per episode within the ``perturb_*`` bounds below)."""
    perturb_share: float = 0.0
    """From the second round on, the share of episodes (drawn per episode) that fly a perturbed
    system (within the ``perturb_*`` bounds) with the random wrench on the load, besides the
    last ``perturb_rounds`` and ``disturbance_rounds``: robustness learned throughout instead
    of in a last phase."""
    perturb_load_mass: float = 1.0
    """Largest load mass scale (-): the simulated load weighs 1 to this times nominal."""
    perturb_attachment_m: float = 0.03
    """Largest shift of each attachment point, per axis (m)."""
    perturb_cable_m: float = 0.035
    """Largest change of each cable's length (m)."""
    validation_seed: int = 1_000_003
    """With ``[references]``: seed of the held-out references the student-only evaluation
    flies after each round (the same every round; training draws never use it)."""
    validation_episodes: int = 4
    """With ``[references]``: how many held-out references each evaluation flies."""

    def teacher_overrides(self) -> tuple[str, ...]:
        """The ``teacher.*`` entries of ``system_overrides``: the settings of the teacher that
        labels this training (e.g. the generalists')."""
        return tuple(o for o in self.system_overrides if o.startswith("teacher."))


@dataclass(frozen=True)
class TrainingConfig:
    """Optimizer and data loading."""

    batch_size: int = 512
    train_nodes: int = 5
    """Horizon nodes (of 21, drawn at random per batch) the loss looks at in each batch: the
    expected loss is the whole trajectory's, at a third of the decoder's cost."""
    learning_rate: float = 3e-3
    learning_rate_final: float = 3e-4
    """Learning rate reached at the last round (geometric decay over rounds)."""
    weight_decay: float = 0.0
    node_weight_s: float = 0.0
    """Weigh the horizon's nodes in the loss by ``exp(-t / node_weight_s)`` at their times t
    (0: all alike): the first nodes are what is flown before the next plan."""
    output_floor_scale: float = 1.0
    """Factor on the smallest scales of the outputs in the loss (``dagger.OUTPUT_STD_FLOOR``:
    p 0.05 m, w 0.5 rad/s, v 0.2 m/s, a 1 m/s^2): below 1 the outputs are weighed by how much
    the labels really vary, down to that fraction of the floors."""
    ema: float = 0.0
    """Decay per optimizer step of an exponential moving average of the weights (0: none).
    With it the average is the round's student: it flies the next round's episodes, is
    evaluated, checkpointed and exported (the raw weights go on training); it smooths out
    where the last batches happened to leave the weights."""
    workers: int = 0
    """Rollout worker processes; 0 means one per core."""
    torch_threads: int = 0
    """Threads for training; 0 means one per core."""


@dataclass(frozen=True)
class TrainConfig:
    network: NetworkConfig = field(default_factory=NetworkConfig)
    dagger: DaggerConfig = field(default_factory=DaggerConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    system_config: str = "paper"
    """``paper`` for the shipped paper setup, or a path to a system TOML."""
    references: ReferenceDistribution | None = None
    """``[references]``: episodes fly references drawn from this distribution instead of
    ``dagger.trajectories``, and the evaluation flies held-out draws."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


UAV_COUNTS = checks.sequence(checks.integer(2, 9))
"""``dagger.uavs``: quadrotor counts an episode is drawn with."""

ORIENTATIONS = ("constant", "zero-sideslip")


def _trajectory_entry(path: str, value, error):
    """A reference name, or a table ``{name, orientation?, option = number...}``."""
    if isinstance(value, str):
        return checks.text()(path, value)
    if not isinstance(value, dict):
        raise error(
            f"{path}: expected a reference name or a table {{name = ..., orientation = ..., "
            f"option = value...}}, got {value!r}"
        )
    if "name" not in value:
        raise error(f"{path}: expected a table with a 'name' key, got {value!r}")
    entry = {"name": checks.text().raising(error)(f"{path}.name", value["name"])}
    if "orientation" in value:
        entry["orientation"] = checks.choice(ORIENTATIONS).raising(error)(
            f"{path}.orientation", value["orientation"]
        )
    for key, option in value.items():
        if key not in ("name", "orientation"):
            entry[key] = checks.finite.raising(error)(f"{path}.{key}", option)
    return entry


TRAJECTORIES = checks.sequence(
    checks.Check("a reference name or a table naming one with its options", _trajectory_entry),
    min_length=0,
)
"""``dagger.trajectories``: names, or tables with an orientation and options."""


def trajectory_specs(d: DaggerConfig) -> list[tuple[str, str | None, dict]]:
    """Each training trajectory as (name, its own orientation mode or None, options)."""
    out: list[tuple[str, str | None, dict]] = []
    for entry in d.trajectories:
        if isinstance(entry, str):
            out.append((entry, None, {}))
        else:
            options = {k: v for k, v in entry.items() if k not in ("name", "orientation")}
            out.append((entry["name"], entry.get("orientation"), options))
    return out


def trajectory_orientations(d: DaggerConfig, own: str | None) -> tuple[str, ...]:
    """The orientation modes a trajectory is flown with: its own, else ``dagger.orientation``'s."""
    if own is not None:
        return (own,)
    return ORIENTATIONS if d.orientation == "both" else (d.orientation,)


def _field_check(name: str, default) -> checks.Check:
    """The check of one training-config key, from the type of its default (its range is
    checked by ``validate``, with the rules between keys)."""
    if name == "uavs":
        return UAV_COUNTS
    if name == "trajectories":
        return TRAJECTORIES
    if isinstance(default, bool):
        return checks.boolean
    if isinstance(default, int):
        return checks.integer()
    if isinstance(default, float):
        return checks.finite
    if isinstance(default, str):
        return checks.text(allow_empty=True)
    if isinstance(default, tuple):
        return checks.sequence(checks.text(), min_length=0)
    raise TypeError(f"{name}: no check for a default of type {type(default).__name__}")


def _build(cls, path: str, table: dict):
    defaults = cls()
    fields = {f.name: _field_check(f.name, getattr(defaults, f.name)) for f in dataclasses.fields(cls)}
    try:
        return checks.build(cls, path, table, fields)
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{path}: {err}") from err


def validate(config: TrainConfig, source: str = "train config") -> TrainConfig:
    """``config``, or a ``ConfigError`` naming the first field out of range."""
    d = config.dagger
    t = config.training
    checks = [
        ("dagger.rounds", d.rounds, d.rounds >= 1, "at least 1"),
        ("dagger.epochs", d.epochs, d.epochs >= 0, "at least 0"),
        ("dagger.episodes_per_round", d.episodes_per_round, d.episodes_per_round >= 1, "at least 1"),
        ("dagger.episode_s", d.episode_s, d.episode_s >= MIN_EPISODE_S, f"at least {MIN_EPISODE_S:g} s"),
        ("dagger.trajectories", d.trajectories, len(d.trajectories) >= 1, "at least one name"),
        (
            "dagger.orientation",
            d.orientation,
            d.orientation in ("constant", "zero-sideslip", "both"),
            "constant, zero-sideslip or both",
        ),
        (
            "dagger.trajectory_order",
            d.trajectory_order,
            d.trajectory_order in ("alternate", "sample"),
            "alternate or sample",
        ),
        ("dagger.disturbance_rounds", d.disturbance_rounds, 0 <= d.disturbance_rounds, ">= 0"),
        ("dagger.disturbance_force", d.disturbance_force, d.disturbance_force >= 0, ">= 0"),
        ("dagger.disturbance_torque", d.disturbance_torque, d.disturbance_torque >= 0, ">= 0"),
        (
            "dagger.eval_s",
            d.eval_s,
            d.eval_s == 0 or d.eval_s >= MIN_EPISODE_S,
            f"0 (no evaluation) or at least {MIN_EPISODE_S:g} s",
        ),
        ("dagger.select", d.select, d.select in ("best", "last"), "'best' or 'last'"),
        ("dagger.start_jitter_m", d.start_jitter_m, 0 <= d.start_jitter_m <= 0.5, "in [0, 0.5]"),
        ("training.batch_size", config.training.batch_size, config.training.batch_size >= 1, "at least 1"),
        (
            "training.learning_rate",
            config.training.learning_rate,
            config.training.learning_rate > 0,
            "positive",
        ),
        (
            "training.learning_rate_final",
            config.training.learning_rate_final,
            config.training.learning_rate_final > 0,
            "positive",
        ),
        ("training.workers", config.training.workers, config.training.workers >= 0, ">= 0"),
        ("training.torch_threads", t.torch_threads, t.torch_threads >= 0, ">= 0 (0: one per core)"),
        ("training.weight_decay", t.weight_decay, t.weight_decay >= 0, ">= 0"),
        (
            "training.train_nodes",
            config.training.train_nodes,
            1 <= config.training.train_nodes <= N_NODES,
            f"between 1 and {N_NODES}",
        ),
        ("dagger.seed", d.seed, d.seed >= 0, ">= 0"),
        (
            "dagger.validation_seed",
            d.validation_seed,
            d.validation_seed >= 0 and d.validation_seed != d.seed,
            ">= 0 and not dagger.seed",
        ),
        ("dagger.validation_episodes", d.validation_episodes, d.validation_episodes >= 1, "at least 1"),
        (
            "dagger.perturb_rounds",
            d.perturb_rounds,
            0 <= d.perturb_rounds <= d.rounds,
            "between 0 and dagger.rounds",
        ),
        ("dagger.beta_max", d.beta_max, 0.0 <= d.beta_max <= 1.0, "between 0 and 1"),
        ("dagger.perturb_share", d.perturb_share, 0.0 <= d.perturb_share <= 1.0, "between 0 and 1"),
        ("training.ema", t.ema, 0.0 <= t.ema < 1.0, "in [0, 1) (0: no average)"),
        ("training.output_floor_scale", t.output_floor_scale, 0.0 < t.output_floor_scale <= 1.0, "in (0, 1]"),
        ("training.node_weight_s", t.node_weight_s, t.node_weight_s >= 0.0, ">= 0 s (0: every node alike)"),
        (
            "dagger.perturb_load_mass",
            d.perturb_load_mass,
            1.0 <= d.perturb_load_mass <= 3.0,
            "between 1 and 3",
        ),
        (
            "dagger.perturb_attachment_m",
            d.perturb_attachment_m,
            0.0 <= d.perturb_attachment_m <= 0.1,
            "between 0 and 0.1 m",
        ),
        ("dagger.perturb_cable_m", d.perturb_cable_m, 0.0 <= d.perturb_cable_m <= 0.2, "between 0 and 0.2 m"),
    ]
    for name, value, ok, expected in checks:
        if not ok:
            raise ConfigError(f"{source}:{name}: expected {expected}, got {value!r}")
    _check_trajectories(config, source)
    return config


def _check_trajectories(config: TrainConfig, source: str) -> None:
    """Every training trajectory must build in every orientation it will be flown with."""
    from cableload_sim.trajectories import make_reference

    d = config.dagger
    for name, own, options in trajectory_specs(d):
        for orientation in trajectory_orientations(d, own):
            try:
                make_reference(name, orientation=orientation, **options)
            except UsageError as err:
                raise ConfigError(f"{source}:dagger.trajectories: {err}") from None


def check_references_flyable(config: TrainConfig, system_config, force: bool = False, warn=None) -> None:
    """Every training reference, in every orientation it is flown with, within what the system
    can fly over an episode (``feasibility.require_flyable``)."""
    from cableload_sim.physics.feasibility import require_flyable
    from cableload_sim.trajectories import make_reference

    d = config.dagger
    if config.references is not None:
        return  # every draw is checked as it is drawn
    duration = max(d.episode_s, d.eval_s)
    for name, own, options in trajectory_specs(d):
        for orientation in trajectory_orientations(d, own):
            require_flyable(
                make_reference(name, orientation=orientation, **options), system_config, duration, force, warn
            )


def train_config_from_dict(data: dict, source: str = "train config") -> TrainConfig:
    allowed = {"network", "dagger", "training", "system_config", "references"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; expected one of {sorted(allowed)}")
    system = data.get("system_config", "paper")
    if not isinstance(system, str):
        raise ConfigError(f"{source}:system_config: expected a string, got {system!r}")
    config = TrainConfig(
        network=_build(NetworkConfig, f"{source}:network", data.get("network", {})),
        dagger=_build(DaggerConfig, f"{source}:dagger", data.get("dagger", {})),
        training=_build(TrainingConfig, f"{source}:training", data.get("training", {})),
        system_config=system,
        references=None
        if "references" not in data
        else distribution_from_table(data["references"], f"{source}:references"),
    )
    if config.references is not None and "trajectories" in data.get("dagger", {}):
        raise ConfigError(
            f"{source}: give either dagger.trajectories (named references) or a "
            "[references] table (a distribution), not both"
        )
    return validate(config, source)


def load_train_config(path: str | Path) -> TrainConfig:
    path = Path(path)
    data = checks.read_toml(path, "training config")
    config = train_config_from_dict(data, str(path))
    # a file beside the training config, else a shipped configuration's name
    config = dataclasses.replace(config, system_config=str(resolve_config(config.system_config, path.parent)))
    return config
