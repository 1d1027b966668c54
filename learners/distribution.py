"""A distribution of load references to train and validate students on (``[references]``).

Each draw picks a family (figure eight, circle, rounded square, random loop, open wandering
path, pose-to-pose move), an orientation mode (constant, zero-sideslip, oscillating yaw), a size,
speed, turn radius, height and optional vertical motion, all from ranges in the training config,
and turns the path to a random heading. A draw that asks more of the system than
``thrust_share`` of its thrust limit (or beyond any other limit, ``feasibility.check_reference``)
over the episode is drawn again, so every reference is one the teacher can fly with margin.

Draws are seeded: ``sample(seed, count, ...)`` gives the same references for the same seed, and
validation uses a seed that training never does.

```toml
[references]
families = { eight = 1.0, circle = 0.5, square = 0.5, loop = 2.0, wander = 1.5, pose-to-pose = 0.5 }
orientations = { constant = 1.0, zero-sideslip = 1.0, oscillating = 0.5 }
speed = [0.3, 1.5]          # m/s
size = [3.0, 8.0]           # m, the path's extent
```
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import UsageError
from cableload_sim.params import ConfigError

FAMILIES = ("eight", "circle", "square", "loop", "wander", "pose-to-pose")
ORIENTATIONS = ("constant", "zero-sideslip", "oscillating")
RANGES = (
    "speed",
    "size",
    "min_radius",
    "height",
    "z_amplitude",
    "z_frequency",
    "yaw_amplitude_deg",
    "yaw_frequency",
    "move_distance",
    "move_tilt_deg",
)


@dataclass(frozen=True)
class ReferenceSpec:
    """One reference, by name, orientation and options: JSON-serializable, rebuilt anywhere."""

    name: str
    orientation: str = "constant"
    options: Mapping = field(default_factory=dict)

    def build(self):
        from cableload_sim.trajectories import make_reference

        return make_reference(self.name, orientation=self.orientation, **dict(self.options))

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "orientation": self.orientation,
            "options": json.loads(json.dumps(dict(self.options))),
        }

    @classmethod
    def from_dict(cls, data: dict) -> ReferenceSpec:
        return cls(data["name"], data.get("orientation", "constant"), dict(data.get("options", {})))

    def label(self) -> str:
        return f"{self.name} ({self.orientation})"


def _frozen(mapping: dict) -> dict:
    return dict(mapping)


@dataclass(frozen=True)
class ReferenceDistribution:
    """What ``draw`` samples from; ranges are [low, high], drawn uniformly."""

    families: Mapping = field(
        default_factory=lambda: _frozen(
            {"eight": 1.0, "circle": 0.5, "square": 0.5, "loop": 2.0, "wander": 1.5, "pose-to-pose": 0.5}
        )
    )
    """Relative weight of each family."""
    orientations: Mapping = field(
        default_factory=lambda: _frozen({"constant": 1.0, "zero-sideslip": 1.0, "oscillating": 0.5})
    )
    """Relative weight of each orientation mode (pose-to-pose moves turn on their own)."""
    speed: tuple[float, float] = (0.3, 1.5)
    """Speed along the path (m/s); eights and circles: their peak speed."""
    size: tuple[float, float] = (3.0, 8.0)
    """Extent of the path (m): an eight's or loop's larger side, a circle's diameter."""
    min_radius: tuple[float, float] = (0.4, 1.5)
    """Smallest turn radius of squares, loops and wandering paths (m)."""
    height: tuple[float, float] = (0.8, 1.6)
    """Height of the path (m)."""
    vertical_share: float = 0.3
    """Share of the paths that also move up and down."""
    z_amplitude: tuple[float, float] = (0.1, 0.4)
    z_frequency: tuple[float, float] = (0.05, 0.2)
    yaw_amplitude_deg: tuple[float, float] = (15.0, 90.0)
    yaw_frequency: tuple[float, float] = (0.02, 0.1)
    move_distance: tuple[float, float] = (0.5, 3.0)
    """Pose-to-pose: distance moved (m), at the drawn speed's average."""
    move_tilt_deg: tuple[float, float] = (0.0, 10.0)
    """Pose-to-pose: roll and pitch of the goal (deg), each drawn within +- this."""
    thrust_share: float = 0.85
    """Largest share of the thrust limit a drawn reference may ask (quasi-static estimate)."""
    max_redraws: int = 200

    def __post_init__(self):
        _check_weights("families", self.families, FAMILIES)
        _check_weights("orientations", self.orientations, ORIENTATIONS)
        for name in RANGES:
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high):
                raise ConfigError(
                    f"references.{name}: expected [low, high] with 0 <= low <= high, got {[low, high]!r}"
                )
        for name in ("speed", "size", "min_radius", "height"):
            if getattr(self, name)[0] <= 0.0:
                raise ConfigError(
                    f"references.{name}: expected a positive low end, got {list(getattr(self, name))!r}"
                )
        if not 0.0 <= self.vertical_share <= 1.0:
            raise ConfigError(
                f"references.vertical_share: expected a share in [0, 1], got {self.vertical_share!r}"
            )
        if not 0.0 < self.thrust_share <= 1.0:
            raise ConfigError(
                f"references.thrust_share: expected a share in (0, 1], got {self.thrust_share!r}"
            )
        if self.max_redraws < 1:
            raise ConfigError(f"references.max_redraws: expected at least 1, got {self.max_redraws!r}")

    # -----------------------------------------------------------------------------------------

    def draw(self, rng: np.random.Generator, config, duration: float) -> ReferenceSpec:
        """One reference the configured system can fly over ``duration`` s within
        ``thrust_share`` of its thrust limit, its formation inside the planners' box
        (``PlanBounds``) over that time and one horizon more (drawn again until it does: a
        fast open path can leave the box)."""
        from cableload_sim.physics.feasibility import check_reference
        from planners.base import PlanBounds

        bounds = PlanBounds()
        for _ in range(self.max_redraws):
            spec = self._candidate(rng)
            reference = spec.build()
            check = check_reference(reference, config, duration)
            limit = check.limits["thrust_N"] * self.thrust_share
            if check.flyable and check.thrust.value <= limit:
                try:
                    bounds.check_reference(reference, config.system, duration)
                except UsageError:
                    continue
                return spec
        raise ConfigError(
            f"references: no flyable reference in {self.max_redraws} draws within "
            f"{self.thrust_share:.0%} of the thrust limit and inside the planners' "
            "box; expected lower speeds, larger turn radii or shorter episodes"
        )

    def sample(self, seed: int, count: int, config, duration: float) -> list[ReferenceSpec]:
        """``count`` references drawn from ``seed``: the same for the same seed."""
        rng = np.random.default_rng(seed)
        return [self.draw(rng, config, duration) for _ in range(count)]

    def _candidate(self, rng: np.random.Generator) -> ReferenceSpec:
        family = _choose(rng, self.families)
        uniform = lambda name: float(rng.uniform(*getattr(self, name)))  # noqa: E731
        speed, size, height = uniform("speed"), uniform("size"), uniform("height")
        if family == "pose-to-pose":
            return self._move(rng, speed, height)
        orientation = _choose(rng, self.orientations)
        options = {"z": round(height, 3), "rotate_deg": round(float(rng.uniform(-180, 180)), 1)}
        if rng.random() < self.vertical_share:
            options |= {
                "z_amplitude": round(uniform("z_amplitude"), 3),
                "z_frequency": round(uniform("z_frequency"), 3),
            }
        if orientation == "constant":
            options["yaw_deg"] = round(float(rng.uniform(-180, 180)), 1)
        elif orientation == "oscillating":
            options |= {
                "yaw_deg": round(float(rng.uniform(-180, 180)), 1),
                "yaw_amplitude_deg": round(uniform("yaw_amplitude_deg"), 1),
                "yaw_frequency": round(uniform("yaw_frequency"), 3),
            }
        radius = uniform("min_radius")
        if family == "eight":
            ax = 0.5 * size
            ay = 0.5 * size * float(rng.uniform(0.5, 1.0))
            options |= {
                "ax": round(ax, 3),
                "ay": round(ay, 3),
                "w": round(speed / math.hypot(ax, 2.0 * ay), 4),
            }
        elif family == "circle":
            options |= {"radius": round(0.5 * size, 3), "w": round(speed / (0.5 * size), 4)}
        elif family == "square":
            side = size
            options |= {
                "side": round(side, 3),
                "speed": round(speed, 3),
                "corner_radius": round(min(radius, 0.4 * side), 3),
            }
        elif family == "loop":
            options |= {
                "seed": int(rng.integers(2**31)),
                "harmonics": int(rng.integers(2, 7)),
                "size": round(size, 3),
                "speed": round(speed, 3),
                "min_radius": round(min(radius, size / 6.0 - 1e-3), 3),
            }
        else:  # wander
            options |= {
                "seed": int(rng.integers(2**31)),
                "speed": round(speed, 3),
                "min_radius": round(radius, 3),
                "turn_scale": round(float(rng.uniform(3.0, 10.0)), 2),
            }
        return ReferenceSpec(family, orientation, options)

    def _move(self, rng: np.random.Generator, speed: float, height: float) -> ReferenceSpec:
        distance = float(rng.uniform(*self.move_distance))
        heading = float(rng.uniform(-math.pi, math.pi))
        tilt = self.move_tilt_deg[1]
        start_yaw = float(rng.uniform(-180, 180))
        goal = [
            distance * math.cos(heading),
            distance * math.sin(heading),
            height + float(rng.uniform(-0.3, 0.3)),
            float(rng.uniform(-tilt, tilt)),
            float(rng.uniform(-tilt, tilt)),
            start_yaw + float(rng.uniform(-180, 180)),
        ]
        # the smoothstep's peak speed is 35/16 of the average
        duration = max(2.0, 35.0 / 16.0 * distance / speed)
        return ReferenceSpec(
            "pose-to-pose",
            "constant",
            {
                "start": [0.0, 0.0, round(height, 3), 0.0, 0.0, round(start_yaw, 1)],
                "goal": [round(g, 3) for g in goal],
                "duration": round(duration, 2),
            },
        )


def _choose(rng: np.random.Generator, weights: Mapping) -> str:
    names = [name for name, weight in weights.items() if weight > 0.0]
    p = np.array([weights[name] for name in names], dtype=float)
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def _check_weights(what: str, weights: Mapping, known: tuple[str, ...]) -> None:
    unknown = sorted(set(weights) - set(known))
    if unknown:
        raise ConfigError(f"references.{what}: unknown {unknown[0]!r}; expected some of {list(known)}")
    bad = {
        k: v
        for k, v in weights.items()
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0.0
    }
    if bad:
        raise ConfigError(f"references.{what}: expected non-negative weights, got {bad!r}")
    if not any(v > 0.0 for v in weights.values()):
        raise ConfigError(f"references.{what}: expected at least one positive weight, got {dict(weights)!r}")


def _weights(path: str, value, error=ConfigError):
    """A table of names to weights, frozen; the names and weights are checked by
    ``ReferenceDistribution``."""
    if not isinstance(value, dict):
        raise error(f"{path}: expected a table of weights, got {value!r}")
    return _frozen(value)


WEIGHTS = checks.Check("a table of name = weight", _weights)


def _distribution_fields() -> dict[str, checks.Check]:
    fields = {}
    for f in dataclasses.fields(ReferenceDistribution):
        if f.name in ("families", "orientations"):
            fields[f.name] = WEIGHTS
        elif f.name in RANGES:
            fields[f.name] = checks.interval(checks.non_negative, name="[low, high] with 0 <= low <= high")
        elif f.name == "max_redraws":
            fields[f.name] = checks.integer(0)
        else:
            fields[f.name] = checks.finite
    return fields


def distribution_from_table(table: dict, path: str = "references") -> ReferenceDistribution:
    """A ``ReferenceDistribution`` from its TOML table, every value checked."""
    return checks.build(ReferenceDistribution, path, table, _distribution_fields())


def load_distribution(path) -> ReferenceDistribution:
    """The ``[references]`` table of a TOML file (a training config, or a file of its own)."""
    from cableload_sim.checks import read_toml

    data = read_toml(path, "reference distribution")
    if "references" not in data:
        raise ConfigError(f"{path}: no [references] table; expected one (see learners/distribution.py)")
    return distribution_from_table(data["references"], f"{path}:references")


def preview(specs: list[ReferenceSpec], duration: float, out_dir) -> list:
    """Write ``references.json`` (the specs) and ``references.png`` (each seen from above, its
    heading every second, its start marked) into ``out_dir``; returns the paths."""
    import io
    from pathlib import Path

    from matplotlib.figure import Figure

    from cableload_sim.io.files import atomic_write_bytes
    from cableload_sim.rotations import quat_to_matrix
    from cableload_sim.viz.palette import LOAD_COLOR, REFERENCE_COLOR

    out_dir = Path(out_dir)
    columns = min(4, len(specs))
    rows = -(-len(specs) // columns)
    fig = Figure(figsize=(3.2 * columns, 3.4 * rows), layout="constrained")
    t = np.linspace(0.0, duration, int(duration * 50) + 1)
    for k, spec in enumerate(specs):
        ax = fig.add_subplot(rows, columns, k + 1)
        sample = spec.build().sample(t)
        ax.plot(sample.p[:, 0], sample.p[:, 1], color=REFERENCE_COLOR, lw=1.2)
        ax.plot(*sample.p[0, :2], "o", color=LOAD_COLOR, ms=5)
        every = slice(None, None, 50)
        heading = quat_to_matrix(sample.q[every])[:, :2, 0]
        ax.quiver(
            sample.p[every, 0],
            sample.p[every, 1],
            heading[:, 0],
            heading[:, 1],
            color=LOAD_COLOR,
            width=0.006,
            scale=12,
        )
        speed = np.linalg.norm(sample.v, axis=1).max()
        ax.set_title(f"{k}: {spec.label()}\npeak {speed:.2f} m/s", fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{len(specs)} references, {duration:g} s each (heading arrows every second)", fontsize=9)
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    listing = json.dumps([spec.as_dict() for spec in specs], indent=1).encode()
    atomic_write_bytes(out_dir / "references.json", listing)
    atomic_write_bytes(out_dir / "references.png", image.getvalue())
    return [out_dir / "references.json", out_dir / "references.png"]
