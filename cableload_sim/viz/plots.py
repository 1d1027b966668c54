"""PNG plots of a run log with matplotlib (Agg, no pyplot state).

Each ``figure_*`` function returns a ``matplotlib.figure.Figure`` drawn from a ``RunLog``;
``plot_run`` reads a bag and saves them all. World frame z up; m, s, deg, N.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cableload_sim.io.runlog import RunLog, read_run, require_samples
from cableload_sim.metrics import uav_distances
from cableload_sim.params import SimulationParams
from cableload_sim.rotations import quat_angle_between
from cableload_sim.viz.palette import LOAD_COLOR, REFERENCE_COLOR, uav_color


def _figure(rows: int = 1, height: float = 4.0):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, height * rows), layout="constrained")
    axes = [fig.add_subplot(rows, 1, r + 1) for r in range(rows)]
    return fig, axes


def _title(run: RunLog, what: str) -> str:
    planner = run.info.get("planner")
    reference = (run.info.get("reference") or {}).get("name")
    parts = [what, run.path.name] + [p for p in (planner, reference) if p]
    return " - ".join(parts)


def figure_top_view(run: RunLog):
    """Load and quadrotor paths seen from above, with the load reference (m)."""
    fig, (ax,) = _figure(height=6.0)
    samples = run.samples
    if run.ref_p is not None:
        ax.plot(run.ref_p[:, 0], run.ref_p[:, 1], "--", color=REFERENCE_COLOR, lw=1.2, label="load reference")
    ax.plot(samples.load_p[:, 0], samples.load_p[:, 1], color=LOAD_COLOR, lw=2.0, label="load")
    for i, name in enumerate(run.quad_names):
        color = uav_color(i)
        ax.plot(samples.uav_p[:, i, 0], samples.uav_p[:, i, 1], color=color, lw=1.0, label=name)
        if len(samples):
            ax.plot(samples.uav_p[0, i, 0], samples.uav_p[0, i, 1], "o", color=color, ms=4)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(_title(run, "top view"))
    return fig


def tracking_errors(run: RunLog) -> tuple[np.ndarray, np.ndarray]:
    """Load position error norm (m) and attitude error (deg) at each sample."""
    if run.ref_p is None or run.ref_q is None:
        raise ValueError(f"{str(run.path)!r} records no load reference")
    position = np.linalg.norm(run.samples.load_p - run.ref_p, axis=-1)
    attitude = np.degrees(quat_angle_between(run.samples.load_q, run.ref_q))
    return position, attitude


def figure_tracking_errors(run: RunLog):
    """Load position and attitude error against the reference over time."""
    fig, (ax_p, ax_q) = _figure(rows=2, height=3.0)
    position, attitude = tracking_errors(run)
    t = run.samples.t
    ax_p.plot(t, position, color=LOAD_COLOR, label="position error")
    ax_p.set_ylabel("position error (m)")
    ax_q.plot(t, attitude, color=LOAD_COLOR, label="attitude error")
    ax_q.set_ylabel("attitude error (deg)")
    ax_q.set_xlabel("time (s)")
    for ax in (ax_p, ax_q):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0.0)
    ax_p.set_title(_title(run, "load tracking error"))
    return fig


def collision_distance(run: RunLog) -> float:
    """The collision distance of the run's configuration (m), else the configuration's default."""
    simulation = (run.config or {}).get("simulation") or {}
    return float(simulation.get("collision_distance_m", SimulationParams.collision_distance_m))


def figure_min_distance(run: RunLog, collision: float | None = None):
    """Smallest distance between any two quadrotors over time, with the collision line."""
    fig, (ax,) = _figure()
    collision = collision_distance(run) if collision is None else collision
    t = run.samples.t
    distance = uav_distances(run.samples.uav_p) if len(t) else np.zeros(0)
    ax.plot(t, distance, color=uav_color(0), label="min distance")
    ax.axhline(collision, color="red", ls="--", label=f"collision {collision:g} m")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("min distance between quadrotors (m)")
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(_title(run, "quadrotor separation"))
    return fig


def figure_tensions(run: RunLog):
    """Each cable's tension over time (N); zero means slack."""
    fig, (ax,) = _figure()
    t = run.samples.t
    for i, name in enumerate(run.quad_names):
        ax.plot(t, run.samples.cable_tension[:, i], color=uav_color(i), label=f"cable {name}")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("tension (N)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(_title(run, "cable tension"))
    return fig


def starts_on_ground(run: RunLog) -> bool:
    """Whether the run was flown from the ground (``--from-ground``)."""
    return bool((run.info.get("reference") or {}).get("from_ground"))


def figure_lift_off(run: RunLog, before_s: float = 2.0, after_s: float = 3.0):
    """Through lift-off: each cable's tension and their vertical pull on the load against its
    weight (N), and the load's and quadrotors' heights (m)."""
    from cableload_sim.physics.ground import cable_lift, lift_off_index

    s = run.samples
    off = lift_off_index(s.load_p[:, 2])
    t_off = s.t[off] if off is not None else s.t[-1]
    window = (s.t >= t_off - before_s - 3.0) & (s.t <= t_off + after_s)
    t = s.t[window]
    fig, (ax, ax_z) = _figure(rows=2, height=3.2)
    for i, name in enumerate(run.quad_names):
        ax.plot(t, s.cable_tension[window, i], color=uav_color(i), label=f"cable {name}")
    if run.system is not None:
        ax.plot(t, cable_lift(s, run.system)[window], color="black", label="vertical pull on load")
        ax.axhline(
            run.system.load.mass * run.system.gravity, color="black", ls="--", lw=0.8, label="load weight"
        )
    ax.set_ylabel("tension (N)")
    ax_z.plot(t, s.load_p[window, 2], color="black", label="load")
    for i, name in enumerate(run.quad_names):
        ax_z.plot(t, s.uav_p[window, i, 2], color=uav_color(i), label=name)
    ax_z.set_ylabel("height (m)")
    ax_z.set_xlabel("time (s)")
    for a in (ax, ax_z):
        if off is not None:
            a.axvline(t_off, color="gray", ls=":", lw=1.0, label="lift-off")
        a.grid(True, alpha=0.3)
        a.legend(loc="upper left", fontsize=7)
    ax.set_title(_title(run, "cables through lift-off"))
    return fig


def plot_run(path, out_dir, dpi: int = 120) -> list[Path]:
    """Save the run's plots as PNGs in ``out_dir`` (created); returns the files written.

    Plots whose data the log lacks (no reference, no tensions) are left out; a bag without any
    of this project's sample topics is refused (``FileContentError``), nothing written.
    """
    run = require_samples(read_run(path))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {"top_view": figure_top_view(run), "min_distance": figure_min_distance(run)}
    if run.ref_p is not None:
        figures["tracking_error"] = figure_tracking_errors(run)
    if np.isfinite(run.samples.cable_tension).any():
        figures["cable_tension"] = figure_tensions(run)
        if starts_on_ground(run):
            figures["lift_off"] = figure_lift_off(run)
    written = []
    for name, fig in figures.items():
        file = out_dir / f"{name}.png"
        fig.savefig(file, dpi=dpi)
        written.append(file)
    return written
