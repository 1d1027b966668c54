"""Load reference trajectories: where the load should be, and how oriented, at any time.

A reference is a function of time ``t`` (s). Sampling it gives, in the world frame (z up), the
load's position ``p`` (m), velocity ``v`` (m/s), acceleration ``a`` (m/s^2) and jerk ``j`` (m/s^3),
its attitude ``q`` (unit quaternion (w, x, y, z), body to world, continuous in time) and, in the
load's BODY frame, its angular velocity ``omega`` (rad/s) and angular acceleration ``alpha``
(rad/s^2). All of them come from analytic derivatives composed by the chain rule, so they agree
with each other to rounding error.

Looped references (eights, circle, rounded square, race tracks) are built from three parts:

- a closed planar curve parametrized by a *phase* (rad or m), with derivatives up to third order
  with respect to the phase, flown at a constant phase rate (rad/s or m/s) of a *path time* tau;
- a time warp ``tau(t)``: ``dtau/dt`` rises from 0 to 1 over ``ramp_s`` seconds along the C^3
  smoothstep ``35x^4 - 84x^5 + 70x^6 - 20x^7``, so each reference starts from rest
  (v = a = j = 0, omega = alpha = 0 at t = 0) and ``tau = t - ramp_s / 2`` after the ramp;
- an optional vertical oscillation ``z = z0 + z_amplitude sin(2 pi z_frequency tau)`` and an
  orientation mode: ``constant`` yaw or ``zero-sideslip`` (the body x axis along the horizontal
  velocity).

``hover`` holds a pose; ``pose-to-pose`` moves from one pose to another with the same smoothstep.
Times before 0 behave as t = 0. Use ``make_reference(spec, orientation=..., **options)`` to build
one by name and ``reference_catalog()`` to list the names and their options.
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
from numpy.polynomial import Polynomial
from scipy.linalg import cho_factor, cho_solve

from cableload_sim.errors import UsageError
from cableload_sim.rotations import (
    quat_conjugate,
    quat_exp,
    quat_from_euler,
    quat_from_yaw,
    quat_log,
    quat_multiply,
    quat_normalize,
    quat_to_euler,
)

TRACKS_DIR = Path(__file__).resolve().parent / "tracks"
"""Folder of the shipped race-track centerlines, ``<name>_centerline.csv``."""

ORIENTATION_MODES = ("constant", "zero-sideslip", "oscillating")


class Horner:
    """A polynomial evaluated by Horner's rule as ``numpy.polynomial.Polynomial`` evaluates it
    (the same operations in the same order, so the same values), without its domain mapping
    and checks: on the hundred-odd times a student decision samples, those cost several times
    the evaluation itself."""

    def __init__(self, polynomial: Polynomial):
        self.coef = tuple(float(c) for c in polynomial.coef)
        self.polynomial = polynomial

    def __call__(self, x):
        x = np.asarray(x, dtype=float)
        value = self.coef[-1] + x * 0
        for c in self.coef[-2::-1]:
            value = c + value * x
        return value

    def deriv(self, order: int = 1) -> Horner:
        return Horner(self.polynomial.deriv(order))

    def integ(self) -> Horner:
        return Horner(self.polynomial.integ())


SMOOTHSTEP = Horner(Polynomial([0, 0, 0, 0, 35, -84, 70, -20]))
"""C^3 smoothstep on [0, 1]: 0 -> 1 with zero first, second and third derivatives at both ends."""

_SMOOTHSTEP_INTEGRAL = SMOOTHSTEP.integ()  # equals 1/2 at x = 1
_SMOOTHSTEP_DERIVS = tuple(SMOOTHSTEP.deriv(k) for k in (1, 2, 3))  # made once


# --------------------------------------------------------------------------------------------
# Samples, derivative jets and the chain rule
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadReferenceSample:
    """The load reference at K times: world-frame p, v, a, j, attitude q, body omega, alpha."""

    t: np.ndarray
    """Times (s), shape (K,)."""
    p: np.ndarray
    """Position (m), world frame, shape (K, 3)."""
    v: np.ndarray
    """Velocity (m/s), world frame, shape (K, 3)."""
    a: np.ndarray
    """Acceleration (m/s^2), world frame, shape (K, 3)."""
    j: np.ndarray
    """Jerk (m/s^3), world frame, shape (K, 3)."""
    q: np.ndarray
    """Attitude, unit quaternion (w, x, y, z), body to world, continuous in time, shape (K, 4)."""
    omega: np.ndarray
    """Angular velocity (rad/s), body frame, shape (K, 3)."""
    alpha: np.ndarray
    """Angular acceleration (rad/s^2), body frame, shape (K, 3)."""


@dataclass(frozen=True)
class Jet:
    """A quantity and its first three derivatives with respect to one variable.

    Arrays have the sample axis first: (K,) for a scalar, (K, n) for a vector. ``d3`` may be None
    when the third derivative is not available (it is then not propagated).
    """

    value: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    d3: np.ndarray | None = None

    @property
    def orders(self) -> tuple:
        """(value, d1, d2, d3)."""
        return self.value, self.d1, self.d2, self.d3


def _pairs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(K, 2) from two (K,) arrays (``np.stack`` without its checks: references are sampled
    a hundred-odd times per student decision)."""
    out = np.empty(x.shape + (2,))
    out[..., 0] = x
    out[..., 1] = y
    return out


def _along_samples(scalar: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``scalar`` (K,) shaped to broadcast against ``like`` (K, ...)."""
    return scalar.reshape(scalar.shape + (1,) * (like.ndim - scalar.ndim))


def compose(outer: Jet, inner: Jet) -> Jet:
    """Jet of f(g(t)) from f's jet evaluated at g(t) (``outer``) and g's scalar jet (``inner``).

    Faa di Bruno up to third order: f' g', f'' g'^2 + f' g'', f''' g'^3 + 3 f'' g' g'' + f' g'''.
    """
    g1, g2 = _along_samples(inner.d1, outer.d1), _along_samples(inner.d2, outer.d1)
    d1 = outer.d1 * g1
    d2 = outer.d2 * g1**2 + outer.d1 * g2
    d3 = None
    if outer.d3 is not None and inner.d3 is not None:
        g3 = _along_samples(inner.d3, outer.d1)
        d3 = outer.d3 * g1**3 + 3.0 * outer.d2 * g1 * g2 + outer.d1 * g3
    return Jet(outer.value, d1, d2, d3)


def _linear_jet(value: np.ndarray, rate: float) -> Jet:
    """Jet of ``rate * x`` as a function of x, given its value."""
    zeros = np.zeros_like(value)
    return Jet(value, np.full_like(value, rate), zeros, zeros)


def smoothstep_jet(x: np.ndarray, span: float) -> Jet:
    """Jet of ``SMOOTHSTEP(t / span)`` with respect to t, for x = clip(t / span, 0, 1)."""
    d1, d2, d3 = _SMOOTHSTEP_DERIVS
    return Jet(SMOOTHSTEP(x), d1(x) / span, d2(x) / span**2, d3(x) / span**3)


@functools.lru_cache(maxsize=64)
def _past_ramp(ramp_s: float) -> tuple[float, Jet]:
    """``time_warp``'s integral and rate jet at x = 1, as the polynomials give them there (the
    same operations as on an array of ones, so the same values)."""
    one = np.ones(1)
    rate = smoothstep_jet(one, ramp_s)
    return float(_SMOOTHSTEP_INTEGRAL(one)[0]), Jet(*(float(d[0]) for d in rate.orders))


def time_warp(t: np.ndarray, ramp_s: float) -> Jet:
    """Path time tau(t) (s) and its derivatives: dtau/dt = SMOOTHSTEP(t / ramp_s), tau(0) = 0.

    After the ramp tau = t - ramp_s / 2 and dtau/dt = 1. Times before 0 are held at 0.
    """
    t = np.maximum(t, 0.0)
    if t.size and t.min() >= ramp_s:  # past the ramp (most samples): constants, computed once
        integral, rate = _past_ramp(float(ramp_s))
        return Jet(ramp_s * integral + (t - ramp_s), np.full(t.shape, rate.value),
                   np.full(t.shape, rate.d1), np.full(t.shape, rate.d2))
    x = np.clip(t / ramp_s, 0.0, 1.0)
    rate = smoothstep_jet(x, ramp_s)
    tau = ramp_s * _SMOOTHSTEP_INTEGRAL(x) + np.maximum(t - ramp_s, 0.0)
    return Jet(tau, rate.value, rate.d1, rate.d2)


def _as_times(t) -> np.ndarray:
    times = np.atleast_1d(np.asarray(t, dtype=float))
    if times.ndim != 1:
        raise ValueError(f"times must be a float or a 1-D array (s), got shape {times.shape}")
    if not np.all(np.isfinite(times)):
        raise ValueError(f"times must be finite (s), got {times[~np.isfinite(times)][:3]}")
    return times


# --------------------------------------------------------------------------------------------
# Closed planar curves (phase-parametrized, derivatives with respect to the phase)
# --------------------------------------------------------------------------------------------


class PlanarCurve(abc.ABC):
    """A curve in the horizontal plane, (x, y)(phase): closed, periodic with ``period``, unless
    ``closed`` is false (an open path)."""

    period: float
    """Phase length of one lap (rad for angle-parametrized curves, m for arc-length ones)."""
    closed: bool = True

    @abc.abstractmethod
    def jet(self, phase: np.ndarray) -> Jet:
        """(x, y) (m) and derivatives with respect to the phase, arrays of shape (K, 2)."""


class EightCurve(PlanarCurve):
    """Figure eight ``x = ax cos(phase)``, ``y = ay sin(2 phase)``; phase in rad."""

    def __init__(self, ax: float, ay: float):
        self.ax, self.ay = ax, ay
        self.period = 2.0 * math.pi

    def jet(self, phase):
        c1, s1 = np.cos(phase), np.sin(phase)
        c2, s2 = np.cos(2.0 * phase), np.sin(2.0 * phase)
        ax, ay = self.ax, self.ay
        return Jet(
            _pairs(ax * c1, ay * s2),
            _pairs(-ax * s1, 2.0 * ay * c2),
            _pairs(-ax * c1, -4.0 * ay * s2),
            _pairs(ax * s1, -8.0 * ay * c2),
        )


class CircleCurve(PlanarCurve):
    """Circle ``x = r cos(phase)``, ``y = r sin(phase)`` about the origin; phase in rad."""

    def __init__(self, radius: float):
        self.radius = radius
        self.period = 2.0 * math.pi

    def jet(self, phase):
        c, s = self.radius * np.cos(phase), self.radius * np.sin(phase)
        return Jet(_pairs(c, s), _pairs(-s, c), _pairs(-c, -s), _pairs(s, -c))


_TURN = Horner(Polynomial([0, 0, 0, 10, -15, 6]))
"""Quintic smoothstep: the fraction of a corner's 90 deg turned, along the turn (0 to 1)."""
_TURN_DERIVS = (_TURN.deriv(1), _TURN.deriv(2))

_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(24)
_GAUSS_NODES = 0.5 * (_GAUSS_NODES + 1.0)  # on [0, 1]
_GAUSS_WEIGHTS = 0.5 * _GAUSS_WEIGHTS


class RoundedSquareCurve(PlanarCurve):
    """Square of side ``side`` (m) centred at the origin, corners replaced by smooth turns.

    Each corner turns the heading by 90 deg with curvature proportional to ``30u^2(1-u)^2``
    (u from 0 to 1 along the turn, the derivative of ``_TURN``), so curvature and its arc-length
    derivative are continuous everywhere: finite, continuous jerk at constant speed.
    ``corner_radius`` is where a turn starts: that far from the square's vertex, like a circular
    fillet of that radius (the turn's peak curvature is about 1.73 / corner_radius). Phase: arc
    length (m), from the middle of the right side (side/2, 0), counter-clockwise. Positions in a
    turn are Gauss-Legendre integrals of the heading, exact to rounding.
    """

    def __init__(self, side: float, corner_radius: float):
        self.side, self.corner_radius = side, corner_radius
        cut_per_length = np.sum(_GAUSS_WEIGHTS * np.cos(0.5 * math.pi * _TURN(_GAUSS_NODES)))
        self.turn_length = corner_radius / float(cut_per_length)
        self.straight_length = side - 2.0 * corner_radius
        self.quarter_length = self.straight_length + self.turn_length
        self.period = 4.0 * self.quarter_length

    def _turn_heading(self, arc):
        """Heading (rad) at arc length ``arc`` into the first turn (which goes from +y to -x)."""
        return 0.5 * math.pi * (1.0 + _TURN(arc / self.turn_length))

    def _first_quarter(self, arc) -> Jet:
        """Jet along the first quarter (``arc`` in [0, quarter_length)): half a side from
        (side/2, 0) heading +y, the turn, half of the next side heading -x."""
        half, c = 0.5 * self.straight_length, self.turn_length
        turn_arc = np.clip(arc - half, 0.0, c)
        in_turn = (arc >= half) & (arc < half + c)
        nodes = self._turn_heading(turn_arc[:, None] * _GAUSS_NODES)
        mean_direction = np.stack(
            [np.cos(nodes) @ _GAUSS_WEIGHTS, np.sin(nodes) @ _GAUSS_WEIGHTS], -1
        )
        turn_run = turn_arc[:, None] * mean_direction
        straight_run = np.minimum(arc, half)[:, None] * np.array([0.0, 1.0])
        exit_run = np.maximum(arc - half - c, 0.0)[:, None] * np.array([-1.0, 0.0])
        position = np.array([0.5 * self.side, 0.0]) + straight_run + turn_run + exit_run

        heading = np.where(arc >= half + c, math.pi, self._turn_heading(turn_arc))
        tangent = np.stack([np.cos(heading), np.sin(heading)], axis=-1)
        normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=-1)
        u = turn_arc / c
        curvature = np.where(in_turn, 0.5 * math.pi * _TURN_DERIVS[0](u) / c, 0.0)[:, None]
        curvature_rate = np.where(in_turn, 0.5 * math.pi * _TURN_DERIVS[1](u) / c**2, 0.0)[:, None]
        return Jet(
            position,
            tangent,
            curvature * normal,
            curvature_rate * normal - curvature**2 * tangent,
        )

    def jet(self, phase):
        arc = np.mod(phase, self.period)
        quarter = np.minimum(np.floor(arc / self.quarter_length), 3.0)
        local = self._first_quarter(arc - quarter * self.quarter_length)
        return Jet(*(_rotate_planar(0.5 * math.pi * quarter, v) for v in local.orders))


def _rotate_planar(angle: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Planar vectors (K, 2) rotated by ``angle`` (K,) rad, counter-clockwise."""
    cos, sin = np.cos(angle), np.sin(angle)
    return np.stack(
        [cos * vectors[:, 0] - sin * vectors[:, 1], sin * vectors[:, 0] + cos * vectors[:, 1]],
        axis=-1,
    )


class FourierSeries:
    """Complex Fourier series ``f(theta) = sum_k c_k exp(i k theta)`` with derivatives up to 3rd."""

    def __init__(self, wavenumbers: np.ndarray, coefficients: np.ndarray):
        self.wavenumbers = np.asarray(wavenumbers, dtype=int)
        self.coefficients = np.asarray(coefficients, dtype=complex)

    @classmethod
    def from_samples(
        cls, samples: np.ndarray, taper_std: float | None = None, rel_tol: float = 1e-13
    ):
        """Series interpolating ``samples`` at theta_n = 2 pi n / N, optionally Gaussian-tapered
        (``taper_std`` in harmonics); harmonics below ``rel_tol`` of the largest are dropped."""
        n = samples.shape[0]
        wavenumbers = np.fft.fftfreq(n, 1.0 / n).astype(int)
        coefficients = np.fft.fft(samples) / n
        if taper_std is not None:
            coefficients *= np.exp(-0.5 * (wavenumbers / taper_std) ** 2)
        keep = (np.abs(coefficients) > rel_tol * np.abs(coefficients).max()) & (
            np.abs(wavenumbers) < n // 2
        )
        return cls(wavenumbers[keep], coefficients[keep])

    @functools.cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The coefficients of the series and its first three derivatives by wavenumber
        |k| = 0, 1, ...: (forward (k >= 0), conjugated backward (k < 0)), each (|k|max + 1, 4);
        made once (a reference is sampled at every planner decision)."""
        k = self.wavenumbers
        derivatives = self.coefficients[:, None] * (1j * k[:, None]) ** np.arange(4)  # (H, 4)
        forward = np.zeros((np.max(np.abs(k), initial=0) + 1, 4), dtype=complex)
        backward = np.zeros_like(forward)
        np.add.at(forward, k[k >= 0], derivatives[k >= 0])
        np.add.at(backward, -k[k < 0], derivatives[k < 0])
        return forward, backward.conj()

    def jet(self, theta: np.ndarray) -> Jet:
        """Complex values and derivatives with respect to theta, shape (K,)."""
        forward, backward_conj = self._tables
        powers = _unit_powers(np.asarray(theta, dtype=float), len(forward) - 1)
        # exp(-i k theta) = conj(exp(i k theta)), so negative wavenumbers reuse the same powers
        values = powers @ forward + (powers @ backward_conj).conj()
        return Jet(*values.T)

    def on_grid(self, n: int, order: int = 0) -> np.ndarray:
        """The ``order``-th derivative at theta = 2 pi m / n, m = 0..n-1 (by inverse FFT)."""
        spectrum = np.zeros(n, dtype=complex)
        np.add.at(
            spectrum, self.wavenumbers % n, self.coefficients * (1j * self.wavenumbers) ** order
        )
        return np.fft.ifft(spectrum) * n


def _unit_powers(theta: np.ndarray, highest: int, block: int = 16) -> np.ndarray:
    """exp(i k theta) for k = 0..highest, shape (K, highest + 1), as products of two exponentials
    (k = block * m + r): far fewer complex exponentials than one per entry, and just as exact."""
    low = np.exp(1j * np.outer(theta, np.arange(block)))
    high = np.exp(1j * np.outer(theta, block * np.arange(highest // block + 1)))
    return (high[:, :, None] * low[:, None, :]).reshape(len(theta), -1)[:, : highest + 1]


class FourierLoopCurve(PlanarCurve):
    """A closed curve ``x + i y = shape(sigma)``, sigma = 2 pi (s + start_offset) / length, where
    the Fourier series ``shape`` is sampled equally in arc length, so s is the arc length (m)."""

    def __init__(self, shape: FourierSeries, length: float, start_offset: float = 0.0):
        self.shape, self.period, self.start_offset = shape, length, start_offset

    @functools.cached_property
    def smallest_turn_radius(self) -> float:
        """Smallest radius of curvature (m), computed once."""
        return min_turn_radius(self)

    def jet(self, phase):
        sigma = 2.0 * math.pi * (np.asarray(phase, dtype=float) + self.start_offset) / self.period
        z = compose(self.shape.jet(sigma), _linear_jet(sigma, 2.0 * math.pi / self.period))
        return Jet(*map(_as_xy, z.orders))


def _as_xy(z: np.ndarray) -> np.ndarray:
    """Complex x + i y (K,) as planar points (K, 2)."""
    return _pairs(z.real, z.imag)


# --------------------------------------------------------------------------------------------
# Race tracks: centerline CSV -> smooth closed curve with a minimum turn radius, by arc length
# --------------------------------------------------------------------------------------------

TRACK_FEATURE = 4.0
"""Shortest shape feature the track fit keeps, in units of ``min_radius``: a lap of length L gets
about L / (4 min_radius) harmonics (8 to 64), as finer detail could not be flown anyway."""

TRACK_CURVATURE_MARGIN = 1.2
"""The fit limits the turn radius to this times ``min_radius``; the smoothing after it tightens
turns a little, which this margin absorbs."""

TRACK_SMOOTHING = 0.6
"""Std of the Gaussian arc-length smoothing after the fit, in units of ``min_radius``: it spreads
curvature changes over about a turn radius, which bounds the jerk."""


def _loop_angles(n: int) -> np.ndarray:
    """n equally spaced angles 2 pi m / n (rad), m = 0..n-1."""
    return 2.0 * math.pi * np.arange(n) / n


MAX_TRACK_BYTES = 16 << 20
"""Largest centerline file read (bytes); the shipped one has 864 points in 40 kB."""

MAX_TRACK_COORDINATE_M = 1e8
"""Largest centerline coordinate (m) accepted: beyond the Earth's size, and where the fit's
arithmetic would overflow."""


def read_centerline(path: Path) -> np.ndarray:
    """(N, 2) centerline points (m) of a CSV: x, y first on each line, '#' lines, one header
    line (e.g. ``x_m,y_m``) and extra columns ignored."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"track: centerline file '{path}' not found (expected x_m,y_m rows)")
    if not path.is_file():
        raise UsageError(f"track: '{path}' is not a regular file (expected a CSV of x_m,y_m rows)")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_TRACK_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"track: cannot read centerline file '{path}': {error}") from None
    if len(data) > MAX_TRACK_BYTES:
        raise UsageError(f"track: '{path}' is larger than {MAX_TRACK_BYTES >> 20} MB; expected a "
                         "CSV of x_m,y_m rows")
    points = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(",")
        try:
            points.append((float(fields[0]), float(fields[1])))
        except (ValueError, IndexError):
            if not points and _is_header(fields):
                continue  # a header row without '#'
            raise UsageError(
                f"track: line {number} of '{path}' must start with two numbers x_m,y_m, "
                f"got {line.strip()!r}"
            ) from None
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    if len(points) < 4 or not np.all(np.isfinite(points)):
        raise UsageError(
            f"track: '{path}' must hold at least 4 finite x,y points, got {len(points)}"
        )
    largest = float(np.max(np.abs(points)))
    if largest > MAX_TRACK_COORDINATE_M:
        raise UsageError(f"track: '{path}' has a coordinate of {largest:g} m; expected at most "
                         f"{MAX_TRACK_COORDINATE_M:g} m in magnitude")
    return points


def _is_header(fields: list[str]) -> bool:
    """Whether a CSV row names its columns: two or more fields, none of the first two a number."""
    if len(fields) < 2:
        return False
    for field in fields[:2]:
        try:
            float(field)
        except ValueError:
            continue
        return False
    return all(field.strip() for field in fields[:2])


def _check_loop_width(path: str, points: np.ndarray, track_size: float, min_radius: float):
    """Refuse a centerline too narrow to turn in (collinear points): scaled to ``track_size``,
    its extent across its principal axis must hold a U-turn of ``min_radius``."""
    centred = points - points.mean(axis=0)
    axes = np.linalg.svd(centred, full_matrices=False)[2]
    across = centred @ axes[1]
    width = float(np.ptp(across)) * track_size / float(np.max(np.ptp(points, axis=0)))
    if width < 2.0 * min_radius:
        raise UsageError(
            f"track: the points of '{path}' span {width:.3g} m across at track_size {track_size:g} "
            f"m, less than a U-turn of min_radius {min_radius:g} m needs ({2 * min_radius:g} m); "
            "expected a closed loop, not points on a line"
        )


def _resample_loop(points: np.ndarray, n: int) -> np.ndarray:
    """n points equally spaced along the closed polyline through ``points``, from the first one."""
    loop = np.vstack([points, points[:1]])
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(loop, axis=0), axis=1))])
    where = np.linspace(0.0, arc[-1], n, endpoint=False)
    return np.stack([np.interp(where, arc, loop[:, 0]), np.interp(where, arc, loop[:, 1])], axis=-1)


def _real_fourier_basis(theta: np.ndarray, harmonics: int) -> list[np.ndarray]:
    """[1, cos k theta, sin k theta] (k = 1..harmonics) and its first two theta-derivatives."""
    k = np.arange(1, harmonics + 1)
    cos, sin = np.cos(np.outer(theta, k)), np.sin(np.outer(theta, k))
    one, zero = np.ones((len(theta), 1)), np.zeros((len(theta), 1))
    return [
        np.hstack([one, cos, sin]),
        np.hstack([zero, -k * sin, k * cos]),
        np.hstack([zero, -(k**2) * cos, -(k**2) * sin]),
    ]


def _curvature_excess(coefficients, d1_basis, d2_basis, max_curvature: float):
    """|curvature| - max_curvature (1/m) where positive, on the bases' grid, and its gradient with
    respect to the coefficients (2H+1, 2), flattened x's then y's: (A,), (A, 2(2H+1))."""
    d1, d2 = d1_basis @ coefficients, d2_basis @ coefficients
    curvature = (d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0]) / np.sum(d1**2, axis=1) ** 1.5
    active = np.abs(curvature) > max_curvature
    (x1, y1), (x2, y2), curvature = d1[active].T, d2[active].T, curvature[active]
    d1_basis, d2_basis = d1_basis[active], d2_basis[active]
    speed_sq = x1**2 + y1**2
    speed_cubed = speed_sq**1.5
    by_x1 = y2 / speed_cubed - 3.0 * curvature * x1 / speed_sq
    by_y1 = -x2 / speed_cubed - 3.0 * curvature * y1 / speed_sq
    by_x = by_x1[:, None] * d1_basis - (y1 / speed_cubed)[:, None] * d2_basis
    by_y = by_y1[:, None] * d1_basis + (x1 / speed_cubed)[:, None] * d2_basis
    return np.abs(curvature) - max_curvature, np.sign(curvature)[:, None] * np.hstack([by_x, by_y])


def _curvature_limited_shape(points: np.ndarray, max_curvature: float, harmonics: int):
    """Closed curve x + i y (Fourier series in theta, ``harmonics`` harmonics) near ``points``
    (equally spaced along the loop, at theta = 2 pi n / N) with |curvature| <= ``max_curvature``.

    Penalized least squares solved by Levenberg-Marquardt on the Fourier coefficients: squared
    distance to the points plus squared curvature excess on a dense grid. Hairpins tighter than
    the limit open into bulbs; elsewhere the curve stays a low-pass fit of the points.
    """
    fit_basis = _real_fourier_basis(_loop_angles(len(points)), harmonics)[0]
    _, d1_basis, d2_basis = _real_fourier_basis(_loop_angles(16 * harmonics), harmonics)
    gram = np.sum(
        fit_basis**2, axis=0
    )  # diagonal: the basis is orthogonal on equally spaced points
    projection = fit_basis.T @ points

    def cost(coefficients):
        excess, gradient = _curvature_excess(coefficients, d1_basis, d2_basis, max_curvature)
        distance_sq = np.sum((fit_basis @ coefficients - points) ** 2)
        return distance_sq + np.sum(excess**2), excess, gradient

    coefficients = projection / gram[:, None]  # the plain low-pass fit to start from
    value, excess, gradient = cost(coefficients)
    damping = 1e-3
    for _ in range(500):
        slope = gradient.T @ excess + (gram[:, None] * coefficients - projection).T.ravel()
        step = _damped_gauss_newton_step(np.tile(gram, 2), gradient, slope, damping)
        step = step.reshape(2, -1).T
        if np.max(np.abs(step)) < 1e-12 * np.max(np.abs(coefficients)):
            break  # nothing left to improve (e.g. no turn was tighter than the limit)
        trial = cost(coefficients + step)
        if trial[0] >= value:
            damping *= 4.0
            continue
        converged = value - trial[0] < 1e-6 * value
        coefficients, (value, excess, gradient) = coefficients + step, trial
        damping = max(damping / 3.0, 1e-9)
        if converged:
            break
    samples = _real_fourier_basis(_loop_angles(4 * harmonics), harmonics)[0] @ coefficients
    return FourierSeries.from_samples(samples[:, 0] + 1j * samples[:, 1])


def _damped_gauss_newton_step(fit_weights, gradient, slope, damping: float) -> np.ndarray:
    """Levenberg-Marquardt step: solve (N + damping diag(N)) step = -slope with the normal matrix
    N = diag(fit_weights) + gradient^T gradient (symmetric positive definite: Cholesky)."""
    normal = gradient.T @ gradient + np.diag(fit_weights)
    normal += damping * np.diag(np.diag(normal))
    return cho_solve(cho_factor(normal, check_finite=False), -slope, check_finite=False)


def _arc_length_samples(shape: FourierSeries, n: int = 2048) -> tuple[np.ndarray, float]:
    """n points (complex) of the closed curve ``shape`` equally spaced in arc length from
    theta = 0, and the loop length (m): trapezoid rule on a fine grid, inverted by interpolation."""
    grid = 2**16
    speed = np.abs(shape.on_grid(grid, order=1))
    speed = np.append(speed, speed[0])
    steps = 0.5 * (speed[1:] + speed[:-1]) * (2.0 * math.pi / grid)
    arc = np.concatenate([[0.0], np.cumsum(steps)])
    theta = np.interp(np.arange(n) * arc[-1] / n, arc, np.linspace(0.0, 2.0 * math.pi, grid + 1))
    return shape.jet(theta).value, float(arc[-1])


def _bounding_box(curve_xy: np.ndarray) -> tuple[np.ndarray, float]:
    """Centre and larger side (m) of the axis-aligned bounding box of dense curve samples."""
    low, high = curve_xy.min(axis=0), curve_xy.max(axis=0)
    return 0.5 * (low + high), float(np.max(high - low))


def _centred_and_scaled(shape: FourierSeries, track_size: float) -> tuple[FourierSeries, Callable]:
    """The shape with its bounding box centred at the origin and its larger side ``track_size``,
    and the same map for points."""
    centre, size = _bounding_box(_as_xy(shape.on_grid(2**14)))
    scale = track_size / size
    coefficients = shape.coefficients * scale
    coefficients[shape.wavenumbers == 0] -= (centre[0] + 1j * centre[1]) * scale
    return FourierSeries(shape.wavenumbers, coefficients), lambda xy: (xy - centre) * scale


@functools.lru_cache(maxsize=8)
def _track_curve(path: str, file_stamp, track_size: float, min_radius: float) -> FourierLoopCurve:
    """The flyable closed curve of a centerline CSV (cached; ``file_stamp`` tracks file changes).

    Fit with a turn-radius limit, Gaussian smoothing in arc length, centre and scale the bounding
    box, resample equally in arc length, and start at the point nearest the CSV's first point.
    """
    del file_stamp
    raw = read_centerline(Path(path))
    centre, size = _bounding_box(raw)
    if size <= 0.0:
        raise UsageError(f"track: the points of '{path}' all coincide, got {raw[0].tolist()}")
    _check_loop_width(path, raw, track_size, min_radius)
    return flyable_loop(raw, track_size, min_radius)


def flyable_loop(raw: np.ndarray, track_size: float, min_radius: float) -> FourierLoopCurve:
    """The closed curve through the points ``raw`` (N, 2), in order, with turns no tighter than
    ``min_radius``, its bounding box centred and ``track_size`` across, parametrized by arc
    length from the point nearest ``raw[0]``."""
    centre, size = _bounding_box(raw)
    work = (raw - centre) * (track_size / size)  # near the final size, where min_radius applies
    length = np.sum(np.linalg.norm(work - np.roll(work, 1, axis=0), axis=1))
    harmonics = int(np.clip(round(length / (TRACK_FEATURE * min_radius)), 8, 64))
    limit = 1.0 / (TRACK_CURVATURE_MARGIN * min_radius)
    fitted = _curvature_limited_shape(_resample_loop(work, 4 * harmonics), limit, harmonics)
    samples, length = _arc_length_samples(fitted)
    taper = length / (2.0 * math.pi * TRACK_SMOOTHING * min_radius)  # in harmonics
    smoothed, to_track = _centred_and_scaled(FourierSeries.from_samples(samples, taper), track_size)
    samples, length = _arc_length_samples(smoothed)
    shape = FourierSeries.from_samples(samples, rel_tol=1e-10)
    outline = _as_xy(shape.on_grid(2**14))
    nearest = np.argmin(np.linalg.norm(outline - to_track(work[0]), axis=1))
    return FourierLoopCurve(shape, length, nearest * length / 2**14)


def min_turn_radius(curve: PlanarCurve, samples: int = 8192) -> float:
    """Smallest radius of curvature (m) over ``samples`` points equally spaced in phase."""
    jet = curve.jet(np.linspace(0.0, curve.period, samples, endpoint=False))
    d1, d2 = jet.d1, jet.d2
    cross = np.abs(d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0])
    return float(np.min(np.linalg.norm(d1, axis=1) ** 3 / np.maximum(cross, 1e-300)))


# --------------------------------------------------------------------------------------------
# Height and orientation along a looped path
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerticalMotion:
    """Height ``z = z0 + amplitude sin(2 pi frequency tau)`` (m) along the path time tau (s)."""

    z0: float
    amplitude: float
    frequency_hz: float

    def jet(self, tau: np.ndarray) -> Jet:
        w = 2.0 * math.pi * self.frequency_hz
        s, c = self.amplitude * np.sin(w * tau), self.amplitude * np.cos(w * tau)
        return Jet(self.z0 + s, w * c, -(w**2) * s, -(w**3) * c)


@dataclass(frozen=True)
class Attitude:
    """Attitude samples: q (K, 4) body to world; omega, alpha (K, 3) body frame."""

    q: np.ndarray
    omega: np.ndarray
    alpha: np.ndarray


def _yaw_attitude(yaw: np.ndarray, yaw_rate: np.ndarray, yaw_acceleration: np.ndarray) -> Attitude:
    return Attitude(quat_from_yaw(yaw), _about_z(yaw_rate), _about_z(yaw_acceleration))


def _about_z(rate: np.ndarray) -> np.ndarray:
    """(K, 3) vectors (0, 0, rate)."""
    out = np.zeros((len(rate), 3))
    out[:, 2] = rate
    return out


class ConstantYaw:
    """The load keeps a fixed yaw (rad), level."""

    mode = "constant"

    def __init__(self, yaw: float):
        self.yaw = yaw

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        zeros = np.zeros(len(phase))
        return _yaw_attitude(zeros + self.yaw, zeros, zeros)


class OscillatingYaw:
    """The load yaws ``yaw0 + amplitude sin(2 pi frequency tau)`` along the path time tau, level:
    an orientation that neither stays fixed nor follows the path."""

    mode = "oscillating"

    def __init__(self, yaw: float, amplitude: float, frequency_hz: float):
        self.yaw, self.amplitude, self.frequency_hz = yaw, amplitude, frequency_hz

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        w = 2.0 * math.pi * self.frequency_hz
        tau = warp.value
        s, c = self.amplitude * np.sin(w * tau), self.amplitude * np.cos(w * tau)
        yaw = compose(Jet(self.yaw + s, w * c, -(w**2) * s, -(w**3) * c), warp)
        return _yaw_attitude(yaw.value, yaw.d1, yaw.d2)


class ZeroSideslip:
    """The load's body x axis follows the path tangent (the horizontal velocity's direction), level.

    The heading is atan2(y', x') of the derivative with respect to the phase, so it is defined
    at rest; a dense table of the unwrapped heading over one lap picks the continuous branch.
    """

    mode = "zero-sideslip"

    def __init__(self, curve: PlanarCurve, rotation: float = 0.0):
        self.period = curve.period
        self.rotation = rotation
        self.heading = getattr(curve, "heading", None)
        """The curve's own continuous heading (rad) of the phase, for open paths."""
        if self.heading is not None:
            return
        for n in 2 ** np.arange(10, 19):  # until neighbouring headings differ by well under pi
            self.grid = np.linspace(0.0, curve.period, n + 1)
            self.unwrapped = np.unwrap(self._raw_heading(curve.jet(self.grid).d1)) + rotation
            if np.max(np.abs(np.diff(self.unwrapped))) < 0.3:
                break
        laps_turned = round((self.unwrapped[-1] - self.unwrapped[0]) / (2.0 * math.pi))
        self.turn_per_lap = 2.0 * math.pi * laps_turned

    @staticmethod
    def _raw_heading(tangent: np.ndarray) -> np.ndarray:
        return np.arctan2(tangent[:, 1], tangent[:, 0])

    def _continuous_heading(self, phase: np.ndarray, raw: np.ndarray) -> np.ndarray:
        """``raw`` heading (rad) moved by whole turns onto the branch of the table at ``phase``."""
        if self.heading is not None:
            nearby = self.heading(phase) + self.rotation
            return raw + 2.0 * math.pi * np.round((nearby - raw) / (2.0 * math.pi))
        laps = np.floor(phase / self.period)
        table = np.interp(phase - laps * self.period, self.grid, self.unwrapped)
        nearby = table + laps * self.turn_per_lap
        return raw + 2.0 * math.pi * np.round((nearby - raw) / (2.0 * math.pi))

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        """Yaw from the path's tau-jet ``horizontal`` (K, 2), composed with the time warp."""
        (dx, dy), (ddx, ddy), (dddx, dddy) = horizontal.d1.T, horizontal.d2.T, horizontal.d3.T
        speed_sq = dx**2 + dy**2
        turning = dx * ddy - dy * ddx
        yaw_tau = Jet(
            self._continuous_heading(phase, self._raw_heading(horizontal.d1)),
            turning / speed_sq,
            (dx * dddy - dy * dddx) / speed_sq
            - 2.0 * turning * (dx * ddx + dy * ddy) / speed_sq**2,
        )
        yaw = compose(yaw_tau, warp)
        return _yaw_attitude(yaw.value, yaw.d1, yaw.d2)


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


class LoadReference(abc.ABC):
    """A load reference trajectory: sample it at any times."""

    name: str

    @abc.abstractmethod
    def sample(self, t) -> LoadReferenceSample:
        """The reference at times ``t`` (s, float or 1-D array); times before 0 behave as 0."""

    @property
    @abc.abstractmethod
    def period_s(self) -> float | None:
        """Lap time (s) after the ramp for loops, duration for pose-to-pose, None for hover."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """Resolved options, JSON-serializable."""

    def start_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(p0 (3,) m, q0 (4,)) = the reference at t = 0."""
        start = self.sample(0.0)
        return start.p[0], start.q[0]


class LoopReference(LoadReference):
    """A closed planar curve flown at ``phase_rate`` after a smooth start, at a (possibly
    oscillating) height, with an orientation mode."""

    def __init__(self, name, curve, phase_rate, height, orientation, ramp_s, options,
                 rotation: float = 0.0):
        self.name, self.curve, self.phase_rate = name, curve, phase_rate
        self.height, self.orientation, self.ramp_s = height, orientation, ramp_s
        self.rotation = rotation
        """The path is turned by this angle (rad) about the vertical through the origin."""
        self._options = dict(options)

    @property
    def period_s(self) -> float:
        return self.curve.period / self.phase_rate

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        return self.sample_warped(t, time_warp(t, self.ramp_s))

    def sample_warped(self, t: np.ndarray, warp: Jet) -> LoadReferenceSample:
        """The path at times ``t`` (K,) flown along the path time ``warp`` (its jet in t)."""
        phase = self.phase_rate * warp.value
        horizontal = compose(self.curve.jet(phase), _linear_jet(phase, self.phase_rate))
        if self.rotation:
            turn = np.full(len(t), self.rotation)
            horizontal = Jet(*(None if order is None else _rotate_planar(turn, order)
                               for order in horizontal.orders))
        position = compose(_with_height(horizontal, self.height.jet(warp.value)), warp)
        attitude = self.orientation.attitude(phase, horizontal, warp)
        p, v, a, j = position.orders
        return LoadReferenceSample(t, p, v, a, j, attitude.q, attitude.omega, attitude.alpha)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "orientation": self.orientation.mode,
            **self._options,
            "period_s": float(self.period_s),
        }


def _with_height(horizontal: Jet, vertical: Jet) -> Jet:
    """Jet of (x, y, z) (K, 3) from the jets of (x, y) (K, 2) and z (K,)."""
    orders = zip(horizontal.orders, vertical.orders, strict=True)
    out = []
    for planar, height in orders:
        xyz = np.empty((planar.shape[0], 3))
        xyz[:, :2] = planar
        xyz[:, 2] = height
        out.append(xyz)
    return Jet(*out)


class Hover(LoadReference):
    """Hold position ``p`` (m) with a fixed yaw (rad), level."""

    def __init__(self, p, yaw: float = 0.0, name: str = "hover"):
        self.name = name
        self.p = np.asarray(p, dtype=float).reshape(3)
        self.yaw = float(yaw)

    @property
    def period_s(self) -> None:
        return None

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        zeros = np.zeros((len(t), 3))
        q = np.tile(quat_from_yaw(self.yaw), (len(t), 1))
        return LoadReferenceSample(
            t, np.tile(self.p, (len(t), 1)), zeros, zeros, zeros, q, zeros, zeros
        )

    def describe(self) -> dict:
        x, y, z = (float(c) for c in self.p)
        return {
            "name": self.name,
            "orientation": "constant",
            "x": x,
            "y": y,
            "z": z,
            "yaw_deg": math.degrees(self.yaw),
            "period_s": None,
        }


class PoseToPose(LoadReference):
    """From a start pose to a goal pose in ``duration_s`` seconds, then hold the goal.

    Position ``p0 + s(t) (p1 - p0)`` and attitude ``q0 (x) exp(s(t) log(q0^-1 q1))`` share the
    smoothstep ``s(t) = SMOOTHSTEP(t / duration_s)`` (zero velocity, acceleration and jerk at both
    ends), so omega (body) = s'(t) r and alpha = s''(t) r with r the shortest rotation vector.
    """

    def __init__(
        self, start_p, start_q, goal_p, goal_q, duration_s: float, name: str = "pose-to-pose"
    ):
        self.name = name
        self.start_p = _vector(start_p, 3, "start_p", "position (m)")
        self.goal_p = _vector(goal_p, 3, "goal_p", "position (m)")
        self.start_q = _unit_quaternion(start_q, "start_q")
        goal_q = _unit_quaternion(goal_q, "goal_q")
        self.duration_s = _positive("pose-to-pose", "duration", duration_s, "s")
        self.rotation = quat_log(quat_multiply(quat_conjugate(self.start_q), goal_q))
        self.goal_q = quat_multiply(self.start_q, quat_exp(self.rotation))  # goal_q or -goal_q

    @property
    def period_s(self) -> float:
        return self.duration_s

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        s = smoothstep_jet(np.clip(t / self.duration_s, 0.0, 1.0), self.duration_s)
        shift, r = self.goal_p - self.start_p, self.rotation
        q = quat_multiply(self.start_q, quat_exp(s.value[:, None] * r))
        return LoadReferenceSample(
            t,
            self.start_p + s.value[:, None] * shift,
            s.d1[:, None] * shift,
            s.d2[:, None] * shift,
            s.d3[:, None] * shift,
            q,
            s.d1[:, None] * r,
            s.d2[:, None] * r,
        )

    def describe(self) -> dict:
        pose = lambda p, q: [*map(float, p), *map(float, np.degrees(quat_to_euler(q)))]  # noqa: E731
        return {
            "name": self.name,
            "orientation": "interpolated",
            "start": pose(self.start_p, self.start_q),
            "goal": pose(self.goal_p, self.goal_q),
            "duration": self.duration_s,
            "period_s": self.duration_s,
        }


# --------------------------------------------------------------------------------------------
# Options and the name -> reference factory
# --------------------------------------------------------------------------------------------


def _number(spec: str, option: str, value, expected: str) -> float:
    """``value`` as a finite float, else a UsageError naming the option, value and expectation."""
    problem = UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    if isinstance(value, bool):
        raise problem
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise problem from None
    if not math.isfinite(number):
        raise problem
    return number


def _finite(spec, option, value, unit) -> float:
    return _number(spec, option, value, f"a finite number ({unit})")


def _positive(spec, option, value, unit) -> float:
    expected = f"a positive finite number ({unit})"
    if not _number(spec, option, value, expected) > 0.0:
        raise UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    return float(value)


def _non_negative(spec, option, value, unit) -> float:
    expected = f"a non-negative finite number ({unit})"
    if not _number(spec, option, value, expected) >= 0.0:
        raise UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    return float(value)


def _optional_positive(spec, option, value, unit) -> float | None:
    return None if value is None else _positive(spec, option, value, unit)


def _vector(value, length: int, option: str, meaning: str, spec: str = "pose-to-pose"):
    """``value`` as a finite float array of shape (length,), else a UsageError."""
    try:
        vector = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        vector = None
    if vector is None or vector.shape != (length,) or not np.all(np.isfinite(vector)):
        raise UsageError(
            f"{spec}: option '{option}' must be {length} finite numbers, {meaning}, got {value!r}"
        )
    return vector


def _unit_quaternion(value, option: str) -> np.ndarray:
    """``value`` (w, x, y, z) normalized, else a UsageError (wrong length, not finite, zero)."""
    q = _vector(value, 4, option, "a quaternion (w, x, y, z)")
    if np.linalg.norm(q) < 1e-9:
        raise UsageError(
            f"pose-to-pose: option '{option}' must be a non-zero quaternion, got {value!r}"
        )
    return quat_normalize(q)


def _seed(spec, option, value, unit) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise UsageError(f"{spec}: option '{option}' must be a non-negative integer ({unit}), "
                         f"got {value!r}")
    return int(value)


def _harmonics(spec, option, value, unit) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= value <= 8:
        raise UsageError(f"{spec}: option '{option}' must be an integer from 1 to 8 ({unit}), "
                         f"got {value!r}")
    return int(value)


def _pose(spec, option, value, unit) -> list[float]:
    return [float(c) for c in _vector(value, 6, option, unit, spec)]


@dataclass(frozen=True)
class Option:
    """One option of a reference: default, unit, meaning, and the check that resolves a value."""

    default: object
    unit: str
    description: str
    check: Callable = _positive

    def resolve(self, spec: str, name: str, value):
        return self.check(spec, name, value, self.unit)


_POSE_UNITS = "x, y, z (m), roll, pitch, yaw (deg)"

_PATH_OPTIONS = {
    "z": Option(1.0, "m", "height of the path", _finite),
    "z_amplitude": Option(0.0, "m", "amplitude of the height oscillation", _non_negative),
    "z_frequency": Option(0.1, "Hz", "frequency of the height oscillation", _non_negative),
    "ramp_s": Option(3.0, "s", "duration of the smooth start from rest"),
    "yaw_deg": Option(0.0, "deg", "load yaw (mean yaw with 'oscillating'); not with "
                                  "'zero-sideslip'", _finite),
    "yaw_amplitude_deg": Option(30.0, "deg", "orientation 'oscillating': amplitude of the yaw",
                                _non_negative),
    "yaw_frequency": Option(0.05, "Hz", "orientation 'oscillating': frequency of the yaw",
                            _non_negative),
    "rotate_deg": Option(0.0, "deg", "the whole path turned about the vertical through the "
                                     "origin", _finite),
}

_EIGHT_PRESETS = MappingProxyType(
    {
        "eight-slow": {"ax": 2.5, "ay": 2.0, "w": 0.25},
        "eight-medium": {"ax": 2.5, "ay": 2.0, "w": 0.5},
        "eight-medium-plus": {"ax": 1.0, "ay": 1.0, "w": 1.0},
        "eight-fast": {"ax": 2.5, "ay": 2.0, "w": 1.0},
    }
)


def _resolve_options(spec: str, schema: dict, given: dict) -> dict:
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
        return OscillatingYaw(math.radians(options["yaw_deg"]),
                              math.radians(options["yaw_amplitude_deg"]), options["yaw_frequency"])
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
    shown = shown | {k: options[k] for k in ("z", "z_amplitude", "z_frequency", "ramp_s",
                                              "rotate_deg")}
    if orientation != "zero-sideslip":
        shown["yaw_deg"] = options["yaw_deg"]
    if orientation == "oscillating":
        shown |= {k: options[k] for k in ("yaw_amplitude_deg", "yaw_frequency")}
    return LoopReference(spec, curve, phase_rate, height, mode, options["ramp_s"], shown,
                         math.radians(options["rotate_deg"]))


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
            f"{spec}: option 'corner_radius' must be at most side/2 = {0.5 * side} (m), "
            f"got {corner!r}"
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
            f"{spec}: option 'min_radius' must be at most track_size/4 = {0.25 * size} (m), "
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
    from cableload_sim.random_paths import random_loop_points

    return flyable_loop(random_loop_points(seed, harmonics), size, min_radius)


def _build_loop(spec, orientation, options):
    size, min_radius = options["size"], options["min_radius"]
    if not min_radius <= size / 6.0:
        # a loop stretched to half its size across must still hold a U-turn of 2 min_radius
        raise UsageError(f"{spec}: option 'min_radius' must be at most size/6 = {size / 6.0:.3g} "
                         f"(m), got {min_radius!r}")
    curve = _random_loop_curve(options["seed"], options["harmonics"], size, min_radius)
    shown = {k: options[k] for k in ("seed", "harmonics", "size", "speed", "min_radius")}
    shown |= {"length_m": curve.period, "min_turn_radius_m": curve.smallest_turn_radius}
    return _path(spec, orientation, options, curve, options["speed"], shown)


def _build_wander(spec, orientation, options):
    from cableload_sim.random_paths import WanderCurve

    curve = WanderCurve(options["seed"], options["min_radius"], options["turn_scale"],
                        options["length"])
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
                "harmonics": Option(4, "-", "detail of the outline, 1 (an ellipse) to 8",
                                    _harmonics),
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
                "turn_scale": Option(6.0, "m", "typical length over which the curvature "
                                               "changes (times 0.5 to 2)"),
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
            f"{spec}: orientation {orientation!r} does not apply ({kind.description}); "
            "expected 'constant'"
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
