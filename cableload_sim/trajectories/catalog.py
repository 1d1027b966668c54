"""Reference kinds by name: their options, each checked, and ``make_reference`` /
``reference_catalog``."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.rotations import (
    quat_from_euler,
)
from cableload_sim.trajectories.attitude import (
    ORIENTATION_MODES,
    ConstantYaw,
    OscillatingYaw,
    VerticalMotion,
    ZeroSideslip,
)
from cableload_sim.trajectories.curves import CircleCurve, EightCurve, PlanarCurve, RoundedSquareCurve
from cableload_sim.trajectories.options import (
    Option,
    _finite,
    _harmonics,
    _non_negative,
    _optional_positive,
    _pose,
    _seed,
)
from cableload_sim.trajectories.pose import PoseToPose
from cableload_sim.trajectories.references import Hover, LoadReference, LoopReference
from cableload_sim.trajectories.tracks import TRACKS_DIR, _track_curve, flyable_loop

# --------------------------------------------------------------------------------------------
# Options and the name -> reference factory
# --------------------------------------------------------------------------------------------


_POSE_UNITS = "x, y, z (m), roll, pitch, yaw (deg)"

_PATH_OPTIONS = {
    "z": Option(1.0, "m", "height of the path", _finite),
    "z_amplitude": Option(0.0, "m", "amplitude of the height oscillation", _non_negative),
    "z_frequency": Option(0.1, "Hz", "frequency of the height oscillation", _non_negative),
    "ramp_s": Option(3.0, "s", "duration of the smooth start from rest"),
    "yaw_deg": Option(
        0.0, "deg", "load yaw (mean yaw with 'oscillating'); not with 'zero-sideslip'", _finite
    ),
    "yaw_amplitude_deg": Option(
        30.0, "deg", "orientation 'oscillating': amplitude of the yaw", _non_negative
    ),
    "yaw_frequency": Option(0.05, "Hz", "orientation 'oscillating': frequency of the yaw", _non_negative),
    "rotate_deg": Option(0.0, "deg", "the whole path turned about the vertical through the origin", _finite),
}

_EIGHT_PRESETS = MappingProxyType(
    {
        "eight-slow": {"ax": 2.5, "ay": 2.0, "w": 0.25},
        "eight-medium": {"ax": 2.5, "ay": 2.0, "w": 0.5},
        "eight-medium-plus": {"ax": 1.0, "ay": 1.0, "w": 1.0},
        "eight-fast": {"ax": 2.5, "ay": 2.0, "w": 1.0},
    }
)


def _resolve_options(spec: str, schema: Mapping[str, Option], given: dict) -> dict:
    unknown = sorted(set(given) - set(schema))
    if unknown:
        expected = ", ".join(schema)
        raise UsageError(f"{spec}: unknown option '{unknown[0]}'; expected one of: {expected}")
    preset = _EIGHT_PRESETS.get(spec, {})
    values = {name: option.default for name, option in schema.items()} | preset | given
    return {name: option.resolve(spec, name, values[name]) for name, option in schema.items()}


def _orientation_mode(spec: str, orientation: str, options: dict, curve: PlanarCurve):
    if orientation == "constant":
        return ConstantYaw(math.radians(options["yaw_deg"]))
    if orientation == "oscillating":
        return OscillatingYaw(
            math.radians(options["yaw_deg"]),
            math.radians(options["yaw_amplitude_deg"]),
            options["yaw_frequency"],
        )
    if options["yaw_deg"] != 0.0:
        raise UsageError(
            f"{spec}: option 'yaw_deg' applies to orientations 'constant' and 'oscillating', "
            f"got {options['yaw_deg']!r} with orientation {orientation!r}"
        )
    return ZeroSideslip(curve, math.radians(options["rotate_deg"]))


def _path(spec, orientation, options, curve, phase_rate, shown) -> LoopReference:
    """A looped reference from its curve and the options shared by all paths."""
    height = VerticalMotion(options["z"], options["z_amplitude"], options["z_frequency"])
    mode = _orientation_mode(spec, orientation, options, curve)
    shown = shown | {k: options[k] for k in ("z", "z_amplitude", "z_frequency", "ramp_s", "rotate_deg")}
    if orientation != "zero-sideslip":
        shown["yaw_deg"] = options["yaw_deg"]
    if orientation == "oscillating":
        shown |= {k: options[k] for k in ("yaw_amplitude_deg", "yaw_frequency")}
    return LoopReference(
        spec, curve, phase_rate, height, mode, options["ramp_s"], shown, math.radians(options["rotate_deg"])
    )


def _build_eight(spec, orientation, options):
    curve = EightCurve(options["ax"], options["ay"])
    shown = {k: options[k] for k in ("ax", "ay", "w")}
    return _path(spec, orientation, options, curve, options["w"], shown)


def _build_circle(spec, orientation, options):
    shown = {k: options[k] for k in ("radius", "w")}
    return _path(spec, orientation, options, CircleCurve(options["radius"]), options["w"], shown)


def _build_square(spec, orientation, options):
    side, corner = options["side"], options["corner_radius"]
    corner = 0.25 * side if corner is None else corner
    if not corner <= 0.5 * side:
        raise UsageError(
            f"{spec}: option 'corner_radius': expected at most side/2 = {0.5 * side} (m), got {corner!r}"
        )
    curve = RoundedSquareCurve(side, corner)
    shown = {"side": side, "corner_radius": corner, "speed": options["speed"]}
    shown["length_m"] = curve.period
    return _path(spec, orientation, options, curve, options["speed"], shown)


def _track_file(spec: str) -> Path:
    where = spec.split(":", 1)[1]
    if not where:
        raise UsageError(f"{spec!r}: expected track:PATH or one of {_shipped_tracks()}")
    shipped = TRACKS_DIR / f"{where}_centerline.csv"
    return shipped if shipped.is_file() else Path(where).expanduser().resolve()


def _build_track(spec, orientation, options):
    size, min_radius = options["track_size"], options["min_radius"]
    if not min_radius <= 0.25 * size:
        raise UsageError(
            f"{spec}: option 'min_radius': expected at most track_size/4 = {0.25 * size} (m), "
            f"got {min_radius!r}"
        )
    path = _track_file(spec)
    try:
        stamp = (path.stat().st_mtime_ns, path.stat().st_size)
    except OSError:
        stamp = None  # reading it reports the problem
    curve = _track_curve(str(path), stamp, size, min_radius)
    shown = {"track_file": str(path), "track_size": size, "speed": options["speed"]}
    shown |= {"min_radius": min_radius, "length_m": curve.period}
    shown["min_turn_radius_m"] = curve.smallest_turn_radius
    return _path(spec, orientation, options, curve, options["speed"], shown)


@functools.lru_cache(maxsize=32)
def _random_loop_curve(seed: int, harmonics: int, size: float, min_radius: float):
    from cableload_sim.trajectories.draws import random_loop_points

    return flyable_loop(random_loop_points(seed, harmonics), size, min_radius)


def _build_loop(spec, orientation, options):
    size, min_radius = options["size"], options["min_radius"]
    if not min_radius <= size / 6.0:
        # a loop stretched to half its size across must still hold a U-turn of 2 min_radius
        raise UsageError(
            f"{spec}: option 'min_radius': expected at most size/6 = {size / 6.0:.3g} (m), got {min_radius!r}"
        )
    curve = _random_loop_curve(options["seed"], options["harmonics"], size, min_radius)
    shown = {k: options[k] for k in ("seed", "harmonics", "size", "speed", "min_radius")}
    shown |= {"length_m": curve.period, "min_turn_radius_m": curve.smallest_turn_radius}
    return _path(spec, orientation, options, curve, options["speed"], shown)


def _build_wander(spec, orientation, options):
    from cableload_sim.trajectories.draws import WanderCurve

    curve = WanderCurve(options["seed"], options["min_radius"], options["turn_scale"], options["length"])
    shown = {k: options[k] for k in ("seed", "speed", "min_radius", "turn_scale", "length")}
    return _path(spec, orientation, options, curve, options["speed"], shown)


def _build_hover(spec, orientation, options):
    position = [options["x"], options["y"], options["z"]]
    return Hover(position, math.radians(options["yaw_deg"]), spec)


def _build_pose_to_pose(spec, orientation, options):
    start, goal = np.asarray(options["start"]), np.asarray(options["goal"])
    start_q, goal_q = (quat_from_euler(*np.radians(pose[3:])) for pose in (start, goal))
    return PoseToPose(start[:3], start_q, goal[:3], goal_q, options["duration"], spec)


@dataclass(frozen=True)
class ReferenceKind:
    """A family of references: what it is, its options, and how to build one."""

    description: str
    options: Mapping[str, Option]
    build: Callable
    """(spec, orientation, resolved options) -> LoadReference."""
    follows_path: bool = True
    """Whether the orientation modes apply (else only 'constant' is accepted)."""


_KINDS = MappingProxyType(
    {
        "eight": ReferenceKind(
            "figure eight x = ax cos(w tau), y = ay sin(2 w tau) at height z, from (ax, 0, z)",
            {
                "ax": Option(2.5, "m", "x amplitude"),
                "ay": Option(2.0, "m", "y amplitude"),
                "w": Option(0.5, "rad/s", "angular rate of the eight"),
                **_PATH_OPTIONS,
            },
            _build_eight,
        ),
        "circle": ReferenceKind(
            "circle about the origin, counter-clockwise from (radius, 0, z)",
            {
                "radius": Option(2.0, "m", "radius"),
                "w": Option(0.5, "rad/s", "angular rate"),
                **_PATH_OPTIONS,
            },
            _build_circle,
        ),
        "square": ReferenceKind(
            "square centred at the origin with continuous-curvature corners, at constant "
            "speed, counter-clockwise from (side/2, 0, z)",
            {
                "side": Option(4.0, "m", "side of the square"),
                "corner_radius": Option(
                    None,
                    "m",
                    "turns start this far from each vertex; default 0.25 * side",
                    _optional_positive,
                ),
                "speed": Option(1.0, "m/s", "constant speed after the ramp"),
                **_PATH_OPTIONS,
            },
            _build_square,
        ),
        "track": ReferenceKind(
            "race-track centerline from a CSV (x_m,y_m,...), smoothed to a minimum turn radius, "
            "centred, scaled to track_size and flown at constant speed",
            {
                # The whole circuit at 1:49 (its 973 m bounding box to 20 m) at 1 m/s: an
                # 87 s lap whose hairpins ask 2.4 m/s^2 and 77 % of the thrust limit
                # (`cableload trajectories --check track:zandvoort`). The earlier 6 m at
                # 1.5 m/s asked 7 m/s^2 in its hairpins, beyond the thrust limit.
                "track_size": Option(20.0, "m", "larger side of the bounding box"),
                "speed": Option(1.0, "m/s", "constant speed after the ramp"),
                "min_radius": Option(0.3, "m", "smallest turn radius, at the scaled size"),
                **_PATH_OPTIONS,
            },
            _build_track,
        ),
        "loop": ReferenceKind(
            "random smooth closed path (seeded): a star-shaped outline of a few harmonics, "
            "stretched, turned, either way round, with turns no tighter than min_radius, "
            "scaled to size and flown at constant speed",
            {
                "seed": Option(0, "-", "which random loop", _seed),
                "harmonics": Option(4, "-", "detail of the outline, 1 (an ellipse) to 8", _harmonics),
                "size": Option(6.0, "m", "larger side of the bounding box"),
                "speed": Option(1.0, "m/s", "constant speed after the ramp"),
                "min_radius": Option(0.5, "m", "smallest turn radius"),
                **_PATH_OPTIONS,
            },
            _build_loop,
        ),
        "wander": ReferenceKind(
            "random smooth open path (seeded) from the origin, its curvature a sum of sines "
            "bounded by 1 / min_radius, flown at constant speed; it never closes",
            {
                "seed": Option(0, "-", "which random path", _seed),
                "speed": Option(1.0, "m/s", "constant speed after the ramp"),
                "min_radius": Option(1.0, "m", "smallest turn radius"),
                "turn_scale": Option(
                    6.0, "m", "typical length over which the curvature changes (times 0.5 to 2)"
                ),
                "length": Option(100.0, "m", "the length checks cover (the path goes on)"),
                **_PATH_OPTIONS,
            },
            _build_wander,
        ),
        "hover": ReferenceKind(
            "hold a fixed position and yaw",
            {
                "x": Option(0.0, "m", "position x", _finite),
                "y": Option(0.0, "m", "position y", _finite),
                "z": Option(1.0, "m", "position z", _finite),
                "yaw_deg": Option(0.0, "deg", "yaw", _finite),
            },
            _build_hover,
            follows_path=False,
        ),
        "pose-to-pose": ReferenceKind(
            "smooth motion from a start pose to a goal pose, at rest at both ends, then hold",
            {
                "start": Option([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], _POSE_UNITS, "start pose", _pose),
                "goal": Option([1.0, 0.0, 1.0, 0.0, 0.0, 90.0], _POSE_UNITS, "goal pose", _pose),
                "duration": Option(11.0, "s", "duration of the motion"),
            },
            _build_pose_to_pose,
            follows_path=False,
        ),
    }
)


def _shipped_tracks() -> list[str]:
    paths = sorted(TRACKS_DIR.glob("*_centerline.csv"))
    return [f"track:{path.name.removesuffix('_centerline.csv')}" for path in paths]


def _kind_name(spec: str) -> str:
    if spec in _EIGHT_PRESETS:
        return "eight"
    if spec.startswith("track:"):
        return "track"
    if spec in _KINDS and spec != "track":
        return spec
    known = [*sorted(_KINDS.keys() - {"track"}), *_EIGHT_PRESETS, *_shipped_tracks(), "track:PATH"]
    raise UsageError(f"unknown reference {spec!r}; known: {', '.join(known)}")


def make_reference(spec: str, *, orientation: str = "constant", **options) -> LoadReference:
    """Build a load reference by name, e.g. ``make_reference("eight-slow", ax=3.0, ay=3.0)``.

    ``spec``: ``eight`` (and presets ``eight-slow``, ``eight-medium``, ``eight-medium-plus``,
    ``eight-fast``), ``circle``, ``square``, ``hover``, ``pose-to-pose``, ``track:NAME`` (shipped)
    or ``track:PATH`` (a CSV). ``orientation``: ``constant`` or ``zero-sideslip`` (paths only).
    Options override the defaults (see ``reference_catalog()``). Bad input raises UsageError (a ValueError).
    """
    if not isinstance(spec, str):
        raise UsageError(f"reference name must be a string, got {spec!r}")
    kind = _KINDS[_kind_name(spec)]
    if orientation not in ORIENTATION_MODES:
        modes = ", ".join(ORIENTATION_MODES)
        raise UsageError(f"unknown orientation mode {orientation!r}; expected one of: {modes}")
    if not kind.follows_path and orientation != "constant":
        raise UsageError(
            f"{spec}: orientation {orientation!r} does not apply ({kind.description}); expected 'constant'"
        )
    return kind.build(spec, orientation, _resolve_options(spec, kind.options, options))


def _catalog_entry(name: str, kind: ReferenceKind, description: str) -> dict:
    options = {}
    for option, spec in kind.options.items():
        default = _EIGHT_PRESETS.get(name, {}).get(option, spec.default)
        options[option] = f"{spec.description} ({spec.unit})" if default is None else default
    if kind.follows_path:
        options["orientation"] = "constant | zero-sideslip (default constant)"
    return {"name": name, "description": description, "options": options}


def reference_catalog() -> list[dict]:
    """Every reference name with a description and its options' defaults (JSON-serializable)."""
    entries = [_catalog_entry("eight", _KINDS["eight"], _KINDS["eight"].description)]
    for preset, values in _EIGHT_PRESETS.items():
        words = ", ".join(f"{k}={v}" for k, v in values.items())
        entries.append(_catalog_entry(preset, _KINDS["eight"], f"figure eight ({words})"))
    for name in ("circle", "square", "loop", "wander", "hover", "pose-to-pose"):
        entries.append(_catalog_entry(name, _KINDS[name], _KINDS[name].description))
    track = _KINDS["track"]
    for name in [*_shipped_tracks(), "track:PATH"]:
        entries.append(_catalog_entry(name, track, track.description))
    return entries
