"""Closed planar curves parametrized by a phase, with derivatives up to third order: the eight,
the circle, the rounded square and Fourier loops (the shape of race tracks and random loops)."""

from __future__ import annotations

import abc
import functools
import math

import numpy as np
from numpy.polynomial import Polynomial

from cableload_sim.trajectories.jets import Horner, Jet, _linear_jet, _pairs, compose

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
        mean_direction = np.stack([np.cos(nodes) @ _GAUSS_WEIGHTS, np.sin(nodes) @ _GAUSS_WEIGHTS], -1)
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
    def from_samples(cls, samples: np.ndarray, taper_std: float | None = None, rel_tol: float = 1e-13):
        """Series interpolating ``samples`` at theta_n = 2 pi n / N, optionally Gaussian-tapered
        (``taper_std`` in harmonics); harmonics below ``rel_tol`` of the largest are dropped."""
        n = samples.shape[0]
        wavenumbers = np.fft.fftfreq(n, 1.0 / n).astype(int)
        coefficients = np.fft.fft(samples) / n
        if taper_std is not None:
            coefficients *= np.exp(-0.5 * (wavenumbers / taper_std) ** 2)
        keep = (np.abs(coefficients) > rel_tol * np.abs(coefficients).max()) & (np.abs(wavenumbers) < n // 2)
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
        np.add.at(spectrum, self.wavenumbers % n, self.coefficients * (1j * self.wavenumbers) ** order)
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


def min_turn_radius(curve: PlanarCurve, samples: int = 8192) -> float:
    """Smallest radius of curvature (m) over ``samples`` points equally spaced in phase."""
    jet = curve.jet(np.linspace(0.0, curve.period, samples, endpoint=False))
    d1, d2 = jet.d1, jet.d2
    cross = np.abs(d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0])
    return float(np.min(np.linalg.norm(d1, axis=1) ** 3 / np.maximum(cross, 1e-300)))
