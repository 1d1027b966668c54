"""MuJoCo's tendon model of the paper's system, stepped without controllers: the reference for
the closed-loop simulator's speed.

The same bodies as ``load_config()`` gives: the load box and the quadrotors as free rigid
bodies (mass and principal inertia of the config), each cable a spatial tendon from the load's
attachment point to the quadrotor's. Two cables:

- ``"limit"`` (the default): the tendon limited to [0, cable length], an inextensible cable
  that goes slack. MuJoCo enforces the limit as a soft constraint (its default ``solref`` and
  ``solimp``, solved by its default Newton solver); no tendon spring or damping is added.
- ``"spring"``: the project's own cable law, the config's stiffness and damping on the tendon
  with a dead band ``springlength = [0, length]`` so that it pulls only when stretched. No
  constraint is left to solve. Unlike the project's cable, MuJoCo's tendon damping also acts
  while the cable is slack.

Every body starts at rest in the project's hover formation (``cableload_sim.physics.statics``),
the cables at their length (stretched by tension / stiffness for ``"spring"``); each
quadrotor is then pushed by the constant world-frame wrench its rotors make at that hover
(thrust balancing its weight and its cable's pull, torque cancelling the cable's moment about
its centre of gravity), applied through ``xfrc_applied``. No controller acts, no rotor
dynamics, no drag, no ground: bodies and cables only.

    .venv/bin/python benchmarks/mujoco_model.py   # steps per second of each way of stepping it
"""

from __future__ import annotations

import time

import mujoco
import numpy as np

from cableload_sim.params import Config, load_config
from cableload_sim.physics.statics import hover_geometry, hover_state
from cableload_sim.rotations import quat_to_matrix

LOAD_START = np.array([0.0, 0.0, 1.0])
"""The load's centre of mass at the start, world frame (m); level, at rest."""

CABLES = ("limit", "spring")
"""The ways a cable can be modelled (the module's docstring says how each is made)."""

MAX_LOAD_DRIFT_M = 1.0
"""The load may move this far from its start during a benchmark before the run counts as broken
(m). The open-loop hover drifts by less than a millimetre over 100 s at 1 ms."""

ROLLOUT_CHUNK_STEPS = 10_000
"""Steps per ``mujoco.rollout`` call: it returns every step's state, so long runs are chunked to
keep that array small (each chunk starts from the last state of the one before)."""


def _vec(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def _check_cable(cable: str) -> None:
    if cable not in CABLES:
        raise ValueError(f"cable: expected one of {CABLES}, got {cable!r}")


def hover_start(config: Config, cable: str = "limit"):
    """The formation around the load at ``LOAD_START``, each cable at its length, stretched
    by its hover tension for ``"spring"``.

    Returns the quadrotors' positions (n, 3, m) and attitudes (n, 4, w x y z), and the constant
    world-frame wrench of each quadrotor's rotors at that hover (n, 6: force in N, torque in N m).
    """
    _check_cable(cable)
    system = config.system
    geometry = hover_geometry(system)
    hover = hover_state(system, LOAD_START, np.array([1.0, 0.0, 0.0, 0.0]), geometry)
    uav_p = hover.uav_p
    if cable == "limit":  # hover_state stretches the elastic cables; this one is inextensible
        stretch = np.array([t / c.stiffness for t, c in zip(hover.tensions, system.cables)])
        uav_p = uav_p - stretch[:, None] * geometry.directions
    wrenches = np.zeros((system.n_uavs, 6))
    for i, quad in enumerate(system.quadrotors):
        arm = quat_to_matrix(hover.uav_q[i]) @ np.asarray(quad.attachment)
        pull = hover.tensions[i] * geometry.directions[i]  # the cable pulls the quadrotor by -pull
        wrenches[i, :3] = hover.thrusts[i]
        wrenches[i, 3:] = np.cross(arm, pull)
    return uav_p, hover.uav_q, wrenches


def _tendon(i: int, cable_params, cable: str) -> str:
    if cable == "limit":
        law = f'limited="true" range="0 {cable_params.length!r}"'
    else:
        law = (
            f'stiffness="{cable_params.stiffness!r}" damping="{cable_params.damping!r}" '
            f'springlength="0 {cable_params.length!r}"'
        )
    return f"""    <spatial name="cable{i}" {law} width="0.003">
      <site site="load_end{i}"/>
      <site site="uav_end{i}"/>
    </spatial>"""


def model_xml(config: Config, integrator: str = "Euler", cable: str = "limit") -> str:
    """MJCF of ``config``'s system: the load, ``n`` quadrotors and their cables as tendons."""
    system = config.system
    load = system.load
    uav_p, uav_q, _ = hover_start(config, cable)
    load_sites = "\n".join(
        f'      <site name="load_end{i}" pos="{_vec(rho)}"/>' for i, rho in enumerate(load.attachments)
    )
    uavs = []
    for i, quad in enumerate(system.quadrotors):
        half_span = quad.rotor.arm_length / np.sqrt(2.0)
        uavs.append(
            f"""    <body name="uav{i}" pos="{_vec(uav_p[i])}" quat="{_vec(uav_q[i])}">
      <freejoint/>
      <inertial pos="0 0 0" mass="{quad.mass!r}" diaginertia="{_vec(quad.inertia)}"/>
      <geom type="box" size="{_vec((half_span, half_span, 0.02))}" contype="0" conaffinity="0"/>
      <site name="uav_end{i}" pos="{_vec(quad.attachment)}"/>
    </body>"""
        )
    uav_bodies = "\n".join(uavs)
    cable_tendons = "\n".join(_tendon(i, c, cable) for i, c in enumerate(system.cables))
    load_inertia = _vec(np.diag(load.inertia_matrix()))
    load_box = f'size="{_vec(0.5 * np.asarray(load.size))}" pos="{_vec(load.box_centre)}"'
    timestep = config.simulation.physics_dt
    return f"""<mujoco model="cableload">
  <option timestep="{timestep!r}" gravity="0 0 {-system.gravity!r}" integrator="{integrator}"/>
  <worldbody>
    <body name="load" pos="{_vec(LOAD_START)}">
      <freejoint/>
      <inertial pos="0 0 0" mass="{load.mass!r}" diaginertia="{load_inertia}"/>
      <geom type="box" {load_box} contype="0" conaffinity="0"/>
{load_sites}
    </body>
{uav_bodies}
  </worldbody>
  <tendon>
{cable_tendons}
  </tendon>
</mujoco>
"""


def build(config: Config | None = None, integrator: str = "Euler", cable: str = "limit"):
    """The compiled model and its data at the hover start, the rotors' wrenches applied."""
    config = config or load_config()
    model = mujoco.MjModel.from_xml_string(model_xml(config, integrator, cable))
    data = mujoco.MjData(model)
    _, _, wrenches = hover_start(config, cable)
    for i, wrench in enumerate(wrenches):
        data.xfrc_applied[model.body(f"uav{i}").id] = wrench
    mujoco.mj_forward(model, data)
    return model, data


def check_sane(model, data) -> None:
    """Raise if the state is not finite or the load has left its start by more than
    ``MAX_LOAD_DRIFT_M``."""
    if not (np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()):
        raise FloatingPointError(f"MuJoCo state not finite at t = {data.time:.3f} s")
    load_p = data.xpos[model.body("load").id]
    drift = float(np.linalg.norm(load_p - LOAD_START))
    if drift > MAX_LOAD_DRIFT_M:
        raise RuntimeError(
            f"MuJoCo load at {np.round(load_p, 3).tolist()} m after {data.time:.3f} s, "
            f"{drift:.3f} m from its start; expected within {MAX_LOAD_DRIFT_M} m"
        )


def mujoco_steps_per_second(
    steps: int, integrator: str = "Euler", cable: str = "limit", config: Config | None = None
) -> float:
    """Physics steps per second of wall time, ``mujoco.mj_step`` called once a step from a
    Python loop, as a user steps it. Raises if the state breaks (``check_sane``)."""
    model, data = build(config, integrator, cable)
    step = mujoco.mj_step
    start = time.perf_counter()
    for _ in range(steps):
        step(model, data)
    elapsed = time.perf_counter() - start
    check_sane(model, data)
    return steps / elapsed


def mujoco_c_loop_steps_per_second(
    steps: int, integrator: str = "Euler", cable: str = "limit", config: Config | None = None
) -> float:
    """The same, all ``steps`` stepped in C by one ``mujoco.mj_step(..., nstep=steps)`` call."""
    model, data = build(config, integrator, cable)
    start = time.perf_counter()
    mujoco.mj_step(model, data, nstep=steps)
    elapsed = time.perf_counter() - start
    check_sane(model, data)
    return steps / elapsed


def rollout_available() -> bool:
    try:
        import mujoco.rollout  # noqa: F401
    except ImportError:
        return False
    return True


def mujoco_rollout_steps_per_second(
    steps: int, integrator: str = "Euler", cable: str = "limit", config: Config | None = None
) -> float:
    """The same through ``mujoco.rollout`` (stepped in C, every step's state returned), one
    trajectory on one thread, the rotors' wrenches passed as its open-loop input."""
    from mujoco import rollout

    model, data = build(config, integrator, cable)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    control_spec = mujoco.mjtState.mjSTATE_XFRC_APPLIED
    control = np.array(data.xfrc_applied).reshape(1, 1, -1)
    chunk = min(steps, ROLLOUT_CHUNK_STEPS)
    states = np.empty((1, chunk, state.size))
    done = 0
    start = time.perf_counter()
    while done < steps:
        n = min(chunk, steps - done)
        rollout.rollout(
            model, data, state[None], control, control_spec=control_spec, nstep=n, state=states[:, :n]
        )
        state = states[0, n - 1].copy()
        done += n
    elapsed = time.perf_counter() - start
    mujoco.mj_setState(model, data, state, spec)
    mujoco.mj_forward(model, data)
    check_sane(model, data)
    return steps / elapsed


if __name__ == "__main__":
    steps = 100_000
    print(f"MuJoCo {mujoco.__version__}, {steps} steps, physics_dt {load_config().simulation.physics_dt} s")
    for cable in CABLES:
        for integrator in ("Euler", "implicitfast"):
            loop = mujoco_steps_per_second(steps, integrator, cable)
            c_loop = mujoco_c_loop_steps_per_second(steps, integrator, cable)
            line = f"{cable:6} {integrator:12} python loop {loop:8.0f}  mj_step nstep {c_loop:8.0f}"
            if rollout_available():
                line += f"  rollout {mujoco_rollout_steps_per_second(steps, integrator, cable):8.0f}"
            print(line + "  steps/s")
