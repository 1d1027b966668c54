"""Race tracks: a centerline CSV fitted into a smooth closed curve with a minimum turn radius,
flown by arc length. The shipped centerlines are in ``centerlines/``."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from cableload_sim import checks
from cableload_sim.errors import UsageError
from cableload_sim.trajectories.curves import FourierLoopCurve, FourierSeries, _as_xy

TRACKS_DIR = Path(__file__).resolve().parent / "centerlines"
"""Folder of the shipped race-track centerlines, ``<name>_centerline.csv``."""


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
    text = checks.read_text(
        path, "track: centerline file", MAX_TRACK_BYTES, error=UsageError, expected="a CSV of x_m,y_m rows"
    )
    rows: list[tuple[float, float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(",")
        try:
            rows.append((float(fields[0]), float(fields[1])))
        except (ValueError, IndexError):
            if not rows and _is_header(fields):
                continue  # a header row without '#'
            raise UsageError(
                f"track: line {number} of '{path}' must start with two numbers x_m,y_m, got {line.strip()!r}"
            ) from None
    points = np.asarray(rows, dtype=float).reshape(-1, 2)
    if len(points) < 4 or not np.all(np.isfinite(points)):
        raise UsageError(f"track: '{path}' must hold at least 4 finite x,y points, got {len(points)}")
    largest = float(np.max(np.abs(points)))
    if largest > MAX_TRACK_COORDINATE_M:
        raise UsageError(
            f"track: '{path}' has a coordinate of {largest:g} m; expected at most "
            f"{MAX_TRACK_COORDINATE_M:g} m in magnitude"
        )
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
    gram = np.sum(fit_basis**2, axis=0)  # diagonal: the basis is orthogonal on equally spaced points
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
