"""3-D replay of a run log with PyVista: on screen, to a video, or to a screenshot.

The scene is built once and moved every frame (PyVista's movie example): the load is a box of
the configured size whose transform follows the logged pose; each quadrotor is a small X frame
with rotor discs in its plan's colour; each cable is a line from the load's attachment point to
the quadrotor's, coloured by tension (purple at zero, teal, yellow at the run's largest tension;
magenta when slack); the load reference is a thin black path; each quadrotor's current plan is
a polyline in its colour. World frame z up, metres.

On screen (when a display exists): space plays or pauses, Up/Down double or halve the speed,
Left/Right step one second, Home restarts. Off screen, ``video=`` writes an MP4 (imageio-ffmpeg)
and ``screenshot=`` a PNG at ``time=``.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.io.runlog import RunLog, read_run, require_samples
from cableload_sim.params import RotorParams
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.viz.palette import LOAD_COLOR, REFERENCE_COLOR, uav_color


class NoDisplay(UsageError, RuntimeError):
    """An interactive replay asked for where no window can open (exit status 2)."""


SLACK_COLOR = (1.0, 0.0, 1.0)
FRAME_COLOR = (0.25, 0.25, 0.25)
BACKGROUND = (1.0, 1.0, 1.0)
_TENSION_STOPS = np.array([[0.267, 0.005, 0.329], [0.128, 0.567, 0.551], [0.993, 0.906, 0.144]])
_CORNER_UPPER_LEFT = 2  # vtkCornerAnnotation corner index


def tension_color(tension: float, max_tension: float) -> tuple[float, float, float]:
    """Cable colour for ``tension`` (N): slack colour at or below zero, else a viridis-like
    ramp from zero to ``max_tension``."""
    if not np.isfinite(tension):
        return FRAME_COLOR
    if tension <= 0.0:
        return SLACK_COLOR
    x = min(tension / max(max_tension, 1e-9), 1.0) * (len(_TENSION_STOPS) - 1)
    k = min(int(x), len(_TENSION_STOPS) - 2)
    color = _TENSION_STOPS[k] + (x - k) * (_TENSION_STOPS[k + 1] - _TENSION_STOPS[k])
    r, g, b = color
    return float(r), float(g), float(b)


def _transform(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3] = R
    matrix[:3, 3] = p
    return matrix


def _quadrotor_meshes(rotor_positions: np.ndarray, arm_length: float):
    """An X frame and four rotor discs of a quadrotor, body frame (m)."""
    import pyvista as pv

    width, height = 0.1 * arm_length + 0.01, 0.02
    arms = [
        pv.Box(bounds=(0.0, arm_length, -width / 2, width / 2, -height / 2, height / 2)).rotate_z(
            np.degrees(np.arctan2(y, x)), inplace=False
        )
        for x, y, _ in rotor_positions
    ]
    discs = [
        pv.Disc(
            center=(x, y, z + height), inner=0.0, outer=0.45 * arm_length, normal=(0.0, 0.0, 1.0), c_res=24
        )
        for x, y, z in rotor_positions
    ]
    return pv.merge(arms), pv.merge(discs)


class ReplayScene:
    """The scene of one run, built once on ``plotter``; ``show(t)`` moves it to time ``t``."""

    def __init__(self, run: RunLog, plotter, *, start: float | None = None, end: float | None = None):
        import pyvista as pv

        if len(run.samples) == 0:
            require_samples(run)
        self.run = run
        self.plotter = plotter
        samples = run.samples
        self.start = float(samples.t[0] if start is None else max(start, samples.t[0]))
        self.end = float(samples.t[-1] if end is None else min(end, samples.t[-1]))
        if self.end < self.start:
            raise UsageError(
                f"replay window [{start}, {end}] s is outside the log's "
                f"[{samples.t[0]:.2f}, {samples.t[-1]:.2f}] s"
            )
        n = samples.n_uavs
        system = run.system
        size = np.array(system.load.size if system is not None else (0.5, 0.4, 0.15))
        self.load_attach = system.attachment_array() if system is not None else np.zeros((n, 3))
        self.uav_attach = (
            np.array([q.attachment for q in system.quadrotors]) if system is not None else np.zeros((n, 3))
        )
        rotor = system.quadrotors[0].rotor if system is not None else RotorParams()
        tension = samples.cable_tension[np.isfinite(samples.cable_tension)]
        self.max_tension = float(tension.max()) if tension.size else 1.0

        plotter.set_background(BACKGROUND)
        window = (samples.t >= self.start - 1e-9) & (samples.t <= self.end + 1e-9)
        points = [samples.load_p[window], samples.uav_p[window].reshape(-1, 3)]
        if run.ref_p is not None:
            points.append(run.ref_p[window])
            reference = pv.lines_from_points(run.ref_p[window]) if window.sum() > 1 else None
            if reference is not None:
                plotter.add_mesh(reference, color=REFERENCE_COLOR, line_width=1.5)
        self._frame_camera(np.vstack([p[np.isfinite(p).all(axis=1)] for p in points]))

        self.load_actor = plotter.add_mesh(
            pv.Box(bounds=(-size[0] / 2, size[0] / 2, -size[1] / 2, size[1] / 2, -size[2] / 2, size[2] / 2)),
            color=LOAD_COLOR,
        )
        frame, discs = _quadrotor_meshes(rotor.rotor_positions(), rotor.arm_length)
        self.frame_actors = []
        self.rotor_actors = []
        self.cables = []
        self.cable_actors = []
        self.plans = []
        self.plan_actors = []
        for i in range(n):
            color = uav_color(i)
            self.frame_actors.append(plotter.add_mesh(frame.copy(), color=FRAME_COLOR))
            self.rotor_actors.append(plotter.add_mesh(discs.copy(), color=color))
            cable = pv.Line((0.0, 0.0, 0.0), (0.0, 0.0, 1.0))
            self.cables.append(cable)
            self.cable_actors.append(plotter.add_mesh(cable, color=SLACK_COLOR, line_width=3, lighting=False))
            plan = pv.lines_from_points(np.zeros((2, 3)))
            self.plans.append(plan)
            self.plan_actors.append(plotter.add_mesh(plan, color=color, line_width=2.5, lighting=False))
        self.time_text = plotter.add_text("", position="upper_left", font_size=12, color="black")
        plotter.add_text(
            f"cables: 0 (purple) to {self.max_tension:.1f} N (yellow), slack magenta; "
            "black: load reference; lines: plans",
            position="lower_left",
            font_size=9,
            color="black",
        )
        self.speed = 1.0
        self.time = self.start
        if getattr(plotter, "off_screen", False):
            # A first render off screen, so later render() calls redraw (screenshots, frames).
            plotter.show(auto_close=False)
        self.show(self.start)

    def _frame_camera(self, points: np.ndarray) -> None:
        """A fixed oblique view that holds the whole replay window."""
        low, high = points.min(axis=0), points.max(axis=0)
        center = (low + high) / 2.0
        radius = float(np.linalg.norm(high - low)) / 2.0 + 0.3
        camera = self.plotter.camera
        view_angle = np.radians(camera.view_angle)
        direction = np.array([0.55, -1.0, 0.75])
        direction /= np.linalg.norm(direction)
        distance = radius / np.tan(view_angle / 2.0)
        self.plotter.camera_position = [tuple(center + distance * direction), tuple(center), (0.0, 0.0, 1.0)]
        margin = radius + 1.0
        self.bounds = (
            center[0] - margin,
            center[0] + margin,
            center[1] - margin,
            center[1] + margin,
            center[2] - margin,
            center[2] + margin,
        )
        self.plotter.renderer.ResetCameraClippingRange(self.bounds)

    def index_at(self, t: float) -> int:
        """The last sample at or before ``t`` (s), within the log."""
        k = int(np.searchsorted(self.run.samples.t, t + 1e-9, side="right")) - 1
        return min(max(k, 0), len(self.run.samples) - 1)

    def show(self, t: float) -> None:
        """Move every object to its logged state at time ``t`` (s)."""
        samples = self.run.samples
        k = self.index_at(t)
        self.time = float(t)
        R_load = quat_to_matrix(samples.load_q[k])
        self.load_actor.user_matrix = _transform(R_load, samples.load_p[k])
        plan = self.run.plan_at(samples.t[k])
        for i in range(samples.n_uavs):
            R_i = quat_to_matrix(samples.uav_q[k, i])
            matrix = _transform(R_i, samples.uav_p[k, i])
            self.frame_actors[i].user_matrix = matrix
            self.rotor_actors[i].user_matrix = matrix
            load_end = samples.load_p[k] + R_load @ self.load_attach[i]
            uav_end = samples.uav_p[k, i] + R_i @ self.uav_attach[i]
            self.cables[i].points = np.array([load_end, uav_end])
            self.cable_actors[i].prop.color = tension_color(samples.cable_tension[k, i], self.max_tension)
            trajectory = None if plan is None else plan.trajectories[i]
            self.plan_actors[i].visibility = trajectory is not None
            if trajectory is not None:
                self._set_polyline(i, trajectory.p)
        self.time_text.SetText(_CORNER_UPPER_LEFT, f"t = {samples.t[k]:6.2f} s   speed x{self.speed:g}")
        self.plotter.renderer.ResetCameraClippingRange(self.bounds)
        self.plotter.render()

    def _set_polyline(self, i: int, points: np.ndarray) -> None:
        import pyvista as pv

        if self.plans[i].n_points == len(points):
            self.plans[i].points = points
        else:
            self.plans[i].copy_from(pv.lines_from_points(points))


def frame_times(start: float, end: float, speed: float, fps: float) -> np.ndarray:
    """Log times (s) of the frames of a video from ``start`` to ``end`` played at ``speed``."""
    if not speed > 0.0 or not fps > 0.0:
        raise UsageError(f"speed and fps must be positive, got speed={speed!r}, fps={fps!r}")
    step = speed / fps
    count = int(np.floor((end - start) / step + 1e-9)) + 1
    return start + step * np.arange(count)


def has_display() -> bool:
    """Whether an on-screen window can be opened."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _round16(size) -> tuple[int, int]:
    """Video encoders want both sides divisible by 16."""
    width, height = (int(v) for v in size)
    if width <= 0 or height <= 0:
        raise UsageError(f"window_size: expected two positive integers, got {size!r}")
    return (-(-width // 16) * 16, -(-height // 16) * 16)


def make_plotter(window_size=(1280, 720), off_screen: bool = True):
    """A PyVista plotter; off screen it renders through EGL without a display."""
    import pyvista as pv

    if off_screen and sys.platform.startswith("linux") and not has_display():
        os.environ.setdefault("VTK_DEFAULT_OPENGL_WINDOW", "vtkEGLRenderWindow")
    return pv.Plotter(off_screen=off_screen, window_size=list(_round16(window_size)))


def replay(
    path,
    video=None,
    screenshot=None,
    time=None,
    start=None,
    end=None,
    speed=1.0,
    interactive=None,
    window_size=(1280, 720),
    fps: float = 25.0,
) -> list[Path]:
    """Replay the run log at ``path``; returns the files written.

    ``video``: write an MP4 of [start, end] played at ``speed`` (``fps`` frames per second).
    ``screenshot``: write a PNG at ``time`` (s; default the end of the window).
    ``interactive`` (default: when a display exists and nothing is written) opens a window.
    ``start``/``end`` (s) cut the replay. Window sides are rounded up to multiples of 16.
    """
    if interactive is None:
        interactive = video is None and screenshot is None and has_display()
    if interactive and not has_display():
        raise NoDisplay("no display for an interactive replay; pass video= or screenshot=")
    if not interactive and video is None and screenshot is None:
        raise NoDisplay("no display: pass video='out.mp4' or screenshot='out.png' to replay off screen")
    run = require_samples(read_run(path))
    written = []
    scene: ReplayScene | None  # dropped (None) at the end
    if screenshot is not None:
        plotter = make_plotter(window_size)
        scene = ReplayScene(run, plotter, start=start, end=end)
        scene.show(scene.end if time is None else float(time))
        plotter.screenshot(str(screenshot))
        plotter.close()
        written.append(Path(screenshot))
    if video is not None:
        plotter = make_plotter(window_size)
        scene = ReplayScene(run, plotter, start=start, end=end)
        scene.speed = float(speed)
        plotter.open_movie(str(video), framerate=int(round(fps)))
        for t in frame_times(scene.start, scene.end, speed, fps):
            scene.show(t)
            plotter.write_frame()
        plotter.close()
        written.append(Path(video))
    if interactive:
        _interactive(run, start, end, speed, window_size)
    # free the scenes' VTK objects now: left to the interpreter's exit, pyvista's destructors
    # run after the modules they use are gone and print an AttributeError each
    scene = plotter = None
    gc.collect()
    return written


def _interactive(run: RunLog, start, end, speed: float, window_size) -> None:
    import time as wall

    plotter = make_plotter(window_size, off_screen=False)
    scene = ReplayScene(run, plotter, start=start, end=end)
    scene.speed = float(speed)
    state = {"playing": True, "last": wall.perf_counter()}

    def toggle():
        state["playing"] = not state["playing"]

    def faster():
        scene.speed *= 2.0

    def slower():
        scene.speed /= 2.0

    def jump(seconds):
        def move():
            scene.show(min(max(scene.time + seconds, scene.start), scene.end))

        return move

    def restart():
        scene.show(scene.start)

    def tick(_step):
        now = wall.perf_counter()
        elapsed, state["last"] = now - state["last"], now
        if state["playing"]:
            t = scene.time + scene.speed * elapsed
            scene.show(scene.start if t > scene.end else t)

    for key, action in (
        ("space", toggle),
        ("Up", faster),
        ("Down", slower),
        ("Right", jump(1.0)),
        ("Left", jump(-1.0)),
        ("Home", restart),
    ):
        plotter.add_key_event(key, action)
    plotter.add_timer_event(max_steps=2**31 - 1, duration=33, callback=tick)
    plotter.show(title=f"cableload replay: {run.path.name}")
