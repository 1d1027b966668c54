"""Derivative jets and the chain rule: the smoothstep, the time warp that starts every
reference from rest, and the sample a reference returns."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numpy.polynomial import Polynomial


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
    def orders(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(value, d1, d2, d3)."""
        return self.value, self.d1, self.d2, self.d3

    @property
    def third(self) -> np.ndarray:
        """``d3`` of a jet that carries it; a ValueError for one that does not."""
        if self.d3 is None:
            raise ValueError("this jet carries no third derivative")
        return self.d3

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> Jet:
        """``fn`` applied to every order (a missing third derivative stays missing)."""
        return Jet(fn(self.value), fn(self.d1), fn(self.d2), None if self.d3 is None else fn(self.d3))


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
    third = outer.d3 is not None and inner.d3 is not None
    o3 = outer.d2 if outer.d3 is None else outer.d3
    i3 = inner.d2 if inner.d3 is None else inner.d3
    if np.iscomplexobj(outer.d1):  # a Fourier series' jet (x + i y)
        g1, g2 = _along_samples(inner.d1, outer.d1), _along_samples(inner.d2, outer.d1)
        c3 = None
        if third:
            c3 = o3 * g1**3 + 3.0 * outer.d2 * g1 * g2 + outer.d1 * _along_samples(i3, outer.d1)
        return Jet(outer.value, outer.d1 * g1, outer.d2 * g1**2 + outer.d1 * g2, c3)
    shape = outer.d1.shape
    k = shape[0]
    d1, d2 = np.empty(shape), np.empty(shape)
    d3 = np.empty(shape) if third else d2
    _compose_orders(
        np.ascontiguousarray(outer.d1, dtype=float).reshape(k, -1),
        np.ascontiguousarray(outer.d2, dtype=float).reshape(k, -1),
        np.ascontiguousarray(o3, dtype=float).reshape(k, -1),
        np.ascontiguousarray(inner.d1, dtype=float).reshape(k),
        np.ascontiguousarray(inner.d2, dtype=float).reshape(k),
        np.ascontiguousarray(i3, dtype=float).reshape(k),
        third,
        d1.reshape(k, -1),
        d2.reshape(k, -1),
        d3.reshape(k, -1),
    )
    return Jet(outer.value, d1, d2, d3 if third else None)


@numba.njit(cache=True)
def _compose_orders(o1, o2, o3, g1, g2, g3, third, d1, d2, d3):  # pragma: no cover - compiled
    """``compose``'s three orders, sample by sample (a reference is sampled at a hundred-odd
    times per student decision, where NumPy's temporaries would cost the most)."""
    for k in range(o1.shape[0]):
        a, b, c = g1[k], g2[k], g3[k]
        for m in range(o1.shape[1]):
            d1[k, m] = o1[k, m] * a
            d2[k, m] = o2[k, m] * (a * a) + o1[k, m] * b
            if third:
                d3[k, m] = o3[k, m] * (a * a * a) + 3.0 * o2[k, m] * a * b + o1[k, m] * c


def _linear_jet(value: np.ndarray, rate: float) -> Jet:
    """Jet of ``rate * x`` as a function of x, given its value."""
    zeros = np.zeros_like(value)
    return Jet(value, np.full_like(value, rate), zeros, zeros)


def smoothstep_jet(x: np.ndarray, span: float) -> Jet:
    """Jet of ``SMOOTHSTEP(t / span)`` with respect to t, for x = clip(t / span, 0, 1)."""
    d1, d2, d3 = _SMOOTHSTEP_DERIVS
    return Jet(SMOOTHSTEP(x), d1(x) / span, d2(x) / span**2, d3(x) / span**3)


@functools.lru_cache(maxsize=64)
def _past_ramp(ramp_s: float) -> tuple[float, tuple[float, float, float]]:
    """``time_warp``'s integral and rate jet at x = 1, as the polynomials give them there (the
    same operations as on an array of ones, so the same values)."""
    one = np.ones(1)
    rate = smoothstep_jet(one, ramp_s)
    return float(_SMOOTHSTEP_INTEGRAL(one)[0]), (float(rate.value[0]), float(rate.d1[0]), float(rate.d2[0]))


def time_warp(t: np.ndarray, ramp_s: float) -> Jet:
    """Path time tau(t) (s) and its derivatives: dtau/dt = SMOOTHSTEP(t / ramp_s), tau(0) = 0.

    After the ramp tau = t - ramp_s / 2 and dtau/dt = 1. Times before 0 are held at 0.
    """
    t = np.maximum(t, 0.0)
    if t.size and t.min() >= ramp_s:  # past the ramp (most samples): constants, computed once
        integral, (speed, speed_d1, speed_d2) = _past_ramp(float(ramp_s))
        return Jet(
            ramp_s * integral + (t - ramp_s),
            np.full(t.shape, speed),
            np.full(t.shape, speed_d1),
            np.full(t.shape, speed_d2),
        )
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
