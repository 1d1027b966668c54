"""An SDF world of the configured multi-lift system, for Gazebo classic 11 with RotorS.

``world_sdf(config)`` returns the world as text; ``write_world(config, path)`` writes it
atomically. SDF 1.7 (read by Gazebo 11's SDFormat 9). The world holds a ground plane, a sun,
the physics (step and gravity from the config, ODE), RotorS's world-level ROS interface plugin,
and one model, ``multilift``, with everything that moves. One model because SDF joins links only
within a model and RotorS's plugins look their joints and links up in the model that loads them.

The model's pose is the load's pose: the model frame is the load's frame as spawned, so
``/gazebo/set_model_state`` of ``multilift`` to a load pose places the whole system at rest in
hover around it (what the Gazebo backend does on reset). All link poses are in the model frame
and every joint pose is in its child link's frame (SDF's default), so the file reads the same
under every SDF version and Gazebo needs no frame resolution.

- ``load``: a box of the configured size, mass and inertia at the model's origin; small spheres
  (visual only) mark the attachment points ``rho_i``; RotorS's odometry plugin publishing the
  run logs' load odometry topic (``/cableload/load/odometry``).
- ``quadN/base_link`` (N = 1..n, names as in the run logs): the body. Its mass and inertia are
  the configured ones less those of the four rotor links, so the rigid quadrotor (body + rotors)
  has exactly the configured mass and inertia about its centre of gravity. RotorS's multirotor
  base, controller interface, IMU and odometry plugins act on it.
- ``quadN/rotor_M`` (M = 0..3, the config's rotor order: front-right, rear-left, front-left,
  rear-right) on ``quadN/rotor_M_joint`` (revolute about the body z axis, unlimited, RotorS's
  "continuous"), each with RotorS's motor model: ``motorConstant`` is the config's thrust
  coefficient (N s^2/rad^2), ``momentConstant`` its drag torque over thrust (m),
  ``timeConstantUp`` = ``timeConstantDown`` its motor time constant, ``maxRotVelocity`` its top
  speed; ``turningDirection`` ``cw`` for rotors whose drag torque acts along +z of the body.
- ``cableI/segment_K`` (K = 0..k-1): the cable as a chain of k equal rigid segments, joined by
  ball joints ``cableI/joint_K``: joint 0 at the load's attachment point (parent ``load``), joint
  k at the quadrotor's (child ``quadN/base_link``, pose ``r_i`` in its body frame).

Initial pose: the hover formation of ``cableload_sim.physics.statics`` around a level load, for rigid
cables (a link chain does not stretch), so each chain is straight and exactly as long as
configured. Like the embedded simulator, the world is the *simulated* system: the config's
``[mismatch]`` applied.

Approximations (the embedded simulator differs here): the cable is a chain of rigid links
joined by ball joints, inextensible and able to bend, instead of a massless unilateral spring;
it has a mass (``CableParams`` has none; ``DEFAULT_CABLE_MASS``); the rotors are discs of
``ROTOR_MASS`` whose gyroscopic effect Gazebo includes; RotorS's rotor drag and rolling moment
are off (the embedded model has neither); the IMU has RotorS's ADIS16448 noise.

Plugin file names are RotorS's (``librotors_gazebo_*.so``, from ``rotors_gazebo_plugins``);
PX4's fork names the same plugins ``libgazebo_*.so`` (``PLUGIN_PREFIX``).
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from cableload_sim.errors import OutputExistsError, UsageError
from cableload_sim.io.files import atomic_write_bytes
from cableload_sim.io.runlog import LOAD_ODOMETRY_TOPIC, default_quad_names
from cableload_sim.params import Config, QuadrotorParams, SystemParams
from cableload_sim.physics.statics import hover_state
from cableload_sim.rotations import matrix_to_quat, quat_from_axis_angle, quat_to_euler, quat_to_matrix

SDF_VERSION = "1.7"
WORLD_NAME = "default"
"""Gazebo's usual world name: RotorS's Gazebo topics live under ``/gazebo/default/``."""
MODEL_NAME = "multilift"
LOAD_LINK = "load"
LOAD_NAMESPACE, LOAD_ODOMETRY = LOAD_ODOMETRY_TOPIC.strip("/").rsplit("/", 1)
"""RotorS publishes ``/<robotNamespace>/<odometryTopic>``: the run logs' load odometry topic."""

DEFAULT_CABLE_SEGMENTS = 10
DEFAULT_CABLE_MASS = 0.01
"""Mass of one cable (kg) when the config gives none: a 1 m braided line of about 10 g/m. Light,
so the world stays close to the embedded simulator's massless cables (each quadrotor carries
about 5 g more at hover), heavy enough for ODE to keep the chain together."""
DEFAULT_LOAD_POSITION = (0.0, 0.0, 1.0)
"""Where the load's centre of mass starts (m, world): the embedded simulator's reset pose."""
CABLE_RADIUS = 0.003
"""Radius of the drawn cable and of the segments' inertia (m)."""
MIN_SEGMENT_INERTIA = 1.0e-6
"""Floor of each principal moment of a segment (kg m^2): a 1 g segment of 0.1 m has 8e-7 about
its transverse axes and 5e-9 about its own, far too small beside the bodies it joins for ODE."""

ROTOR_MASS = 0.005
"""One rotor link (kg): a 5-inch propeller with its motor bell."""
ROTOR_RADIUS = 0.0635
"""Propeller radius (m), 5 inch."""
BODY_SIZE = (0.1, 0.1, 0.04)
"""Collision box of a quadrotor's body (m)."""
ROTOR_VELOCITY_SLOWDOWN_SIM = 10.0
"""RotorS's factor by which the drawn rotor turns slower than the modelled one (RotorS default)."""
ROTOR_DRAG_COEFFICIENT = 0.0
ROLLING_MOMENT_COEFFICIENT = 0.0
"""RotorS's rotor drag and rolling moment: off, as in the embedded simulator."""

MOTOR_COMMAND_TOPIC = "command/motor_speed"
"""ROS topic (in each quadrotor's namespace) of rotor speed commands (mav_msgs/Actuators, rad/s),
forwarded by RotorS's controller interface to the motors' Gazebo topic."""
MOTOR_COMMAND_GAZEBO_TOPIC = "gazebo/command/motor_speed"
IMU_TOPIC = "imu"
QUAD_ODOMETRY_TOPIC = "ground_truth/odometry"
"""Noise-free odometry of each quadrotor (in its namespace), RotorS's ground-truth topic."""

IMU_NOISE = {
    "gyroscopeNoiseDensity": 0.0003394,
    "gyroscopeBiasRandomWalk": 3.8785e-05,
    "gyroscopeBiasCorrelationTime": 1000.0,
    "gyroscopeTurnOnBiasSigma": 0.0087,
    "accelerometerNoiseDensity": 0.004,
    "accelerometerRandomWalk": 0.006,
    "accelerometerBiasCorrelationTime": 300.0,
    "accelerometerTurnOnBiasSigma": 0.196,
}
"""RotorS's default IMU (an ADIS16448), in its plugin's parameter names."""

ODE_ITERATIONS = 100
"""Quick-step iterations: light cable segments between heavy bodies need more than Gazebo's 50."""

PLUGIN_PREFIX = "librotors_gazebo_"


# ---------------------------------------------------------------------------------------------
# Names (shared with the Gazebo backend)


def quad_namespaces(n: int) -> list[str]:
    """RotorS namespaces of the quadrotors, ``quad1`` .. ``quadN`` as in the run logs."""
    return default_quad_names(n)


def base_link(namespace: str) -> str:
    return f"{namespace}/base_link"


def rotor_link(namespace: str, motor: int) -> str:
    return f"{namespace}/rotor_{motor}"


def rotor_joint(namespace: str, motor: int) -> str:
    return f"{namespace}/rotor_{motor}_joint"


def cable_link(cable: int, segment: int) -> str:
    """Segment ``segment`` (0 at the load) of cable ``cable`` (0-based, cable i of quadrotor i)."""
    return f"cable{cable + 1}/segment_{segment}"


def cable_joint(cable: int, node: int) -> str:
    """Joint ``node`` of cable ``cable``: 0 at the load, ``segments`` at the quadrotor."""
    return f"cable{cable + 1}/joint_{node}"


# ---------------------------------------------------------------------------------------------
# Physics of the parts


def cable_mass(system: SystemParams, cable: int) -> float:
    """Mass of cable ``cable`` (kg): the config's when ``CableParams`` has one, else the default."""
    mass = getattr(system.cables[cable], "mass", None)
    return DEFAULT_CABLE_MASS if mass is None else float(mass)


def rotor_inertia() -> np.ndarray:
    """A rotor as a thin disc, symmetric about its axis so the quadrotor's inertia does not
    change as it turns (kg m^2, rotor frame)."""
    across = ROTOR_MASS * ROTOR_RADIUS**2 / 4.0
    return np.diag([across, across, 2.0 * across])


def _point_mass_inertia(mass: float, offset: np.ndarray) -> np.ndarray:
    """Parallel-axis term of a mass at ``offset`` from the reference point (kg m^2)."""
    return mass * (offset @ offset * np.eye(3) - np.outer(offset, offset))


def body_mass_properties(quad: QuadrotorParams) -> tuple[float, np.ndarray]:
    """Mass (kg) and inertia (kg m^2, body frame, about the centre of gravity) of the base link:
    the configured quadrotor less its four rotor links."""
    positions = quad.rotor.rotor_positions()
    mass = quad.mass - 4.0 * ROTOR_MASS
    inertia = quad.inertia_matrix() - sum(
        rotor_inertia() + _point_mass_inertia(ROTOR_MASS, d) for d in positions
    )
    if mass <= 0.0 or np.linalg.eigvalsh(inertia).min() <= 0.0:
        raise UsageError(
            f"quadrotor mass {quad.mass!r} kg and inertia {list(quad.inertia)!r} kg m^2 are too small "
            f"for four {ROTOR_MASS} kg rotors at {quad.rotor.arm_length!r} m; expected a body "
            f"left with positive mass and inertia (got {mass:.4g} kg, "
            f"{np.round(np.linalg.eigvalsh(inertia), 6).tolist()} kg m^2)"
        )
    return mass, inertia


def _segment_inertia(mass: float, length: float) -> np.ndarray:
    across = mass * (3.0 * CABLE_RADIUS**2 + length**2) / 12.0
    along = mass * CABLE_RADIUS**2 / 2.0
    return np.diag(np.maximum([across, across, along], MIN_SEGMENT_INERTIA))


def _rotation_with_z(direction: np.ndarray) -> np.ndarray:
    """The rotation turning the z axis onto the unit vector ``direction`` by the shortest arc."""
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, direction)
    sine = float(np.linalg.norm(axis))
    if sine < 1e-12:
        return np.eye(3) if direction[2] > 0.0 else np.diag([1.0, -1.0, -1.0])
    angle = math.atan2(sine, float(direction[2]))
    return quat_to_matrix(quat_from_axis_angle(axis / sine, angle))


def rigid_cable_hover(system: SystemParams):
    """Hover state of ``system`` in the load's frame (load level at the origin) with inextensible
    cables (``statics.hover_state`` with infinite stiffness)."""
    rigid = dataclasses.replace(
        system, cables=tuple(dataclasses.replace(c, stiffness=math.inf) for c in system.cables)
    )
    return hover_state(rigid, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))


# ---------------------------------------------------------------------------------------------
# XML


def _num(value: float) -> str:
    return repr(float(value) + 0.0)  # shortest text that reads back as the same double; no -0.0


def _nums(values) -> str:
    return " ".join(_num(v) for v in values)


def _pose(position, rotation: np.ndarray | None = None) -> str:
    rpy = (0.0, 0.0, 0.0) if rotation is None else quat_to_euler(matrix_to_quat(rotation))
    return f"{_nums(position)} {_nums(rpy)}"


def _element(parent: ET.Element, tag: str, text=None, **attributes) -> ET.Element:
    element = ET.SubElement(parent, tag, {k: str(v) for k, v in attributes.items()})
    if text is not None:
        element.text = text if isinstance(text, str) else _num(text)
    return element


def _inertial(link: ET.Element, mass: float, inertia: np.ndarray, position=None) -> None:
    inertial = _element(link, "inertial")
    if position is not None:
        _element(inertial, "pose", _pose(position))
    _element(inertial, "mass", mass)
    block = _element(inertial, "inertia")
    for tag, (r, c) in (
        ("ixx", (0, 0)),
        ("ixy", (0, 1)),
        ("ixz", (0, 2)),
        ("iyy", (1, 1)),
        ("iyz", (1, 2)),
        ("izz", (2, 2)),
    ):
        _element(block, tag, float(inertia[r, c]))


def _shape(
    parent: ET.Element, kind: str, name: str, geometry: tuple, pose=None, color: str | None = None
) -> None:
    """A visual or collision ``kind`` with ``geometry`` = (tag, {child: text})."""
    element = _element(parent, kind, name=name)
    if pose is not None:
        _element(element, "pose", pose)
    shape = _element(_element(element, "geometry"), geometry[0])
    for tag, text in geometry[1].items():
        _element(shape, tag, text)
    if color is not None:
        material = _element(element, "material")
        _element(material, "ambient", color)
        _element(material, "diffuse", color)


def _box(size) -> tuple:
    return ("box", {"size": _nums(size)})


def _cylinder(radius: float, length: float) -> tuple:
    return ("cylinder", {"radius": _num(radius), "length": _num(length)})


def _plugin(parent: ET.Element, name: str, library: str, params: dict) -> None:
    plugin = _element(parent, "plugin", name=name, filename=library)
    for tag, value in params.items():
        _element(plugin, tag, value if isinstance(value, str) else _num(value))


def _odometry_params(namespace: str, link: str, odometry_topic: str) -> dict:
    """RotorS's odometry plugin, noise-free: odometry on ``odometry_topic``, the pose, position
    and transform topics beside it."""
    folder = odometry_topic.rpartition("/")[0]
    beside = f"{folder}/" if folder else ""
    zero = "0 0 0"
    return {
        "robotNamespace": namespace,
        "linkName": link,
        "poseTopic": f"{beside}pose",
        "poseWithCovarianceTopic": f"{beside}pose_with_covariance",
        "positionTopic": f"{beside}position",
        "transformTopic": f"{beside}transform",
        "odometryTopic": odometry_topic,
        "parentFrameId": "world",
        "childFrameId": link,
        "measurementDivisor": "1",
        "measurementDelay": "0",
        "unknownDelay": 0.0,
        "noiseNormalPosition": zero,
        "noiseNormalQuaternion": zero,
        "noiseNormalLinearVelocity": zero,
        "noiseNormalAngularVelocity": zero,
        "noiseUniformPosition": zero,
        "noiseUniformQuaternion": zero,
        "noiseUniformLinearVelocity": zero,
        "noiseUniformAngularVelocity": zero,
    }


def _add_environment(world: ET.Element, config: Config, system: SystemParams) -> None:
    dt = config.simulation.physics_dt
    _element(world, "gravity", _nums((0.0, 0.0, -system.gravity)))
    physics = _element(world, "physics", name="default_physics", default="true", type="ode")
    _element(physics, "max_step_size", dt)
    _element(physics, "real_time_factor", 1.0)
    _element(physics, "real_time_update_rate", 1.0 / dt)
    solver = _element(_element(physics, "ode"), "solver")
    _element(solver, "type", "quick")
    _element(solver, "iters", str(ODE_ITERATIONS))
    _element(solver, "sor", 1.3)
    # one per world: bridges every RotorS plugin's Gazebo topics to ROS
    _element(world, "plugin", name="ros_interface_plugin", filename=f"{PLUGIN_PREFIX}ros_interface_plugin.so")
    sun = _element(world, "light", name="sun", type="directional")
    _element(sun, "cast_shadows", "true")
    _element(sun, "pose", _pose((0.0, 0.0, 10.0)))
    _element(sun, "diffuse", "0.8 0.8 0.8 1")
    _element(sun, "specular", "0.2 0.2 0.2 1")
    _element(sun, "direction", "-0.5 0.1 -0.9")
    ground = _element(world, "model", name="ground_plane")
    _element(ground, "static", "true")
    link = _element(ground, "link", name="link")
    plane = ("plane", {"normal": "0 0 1", "size": "100 100"})
    _shape(link, "collision", "collision", plane)
    _shape(link, "visual", "visual", plane, color="0.7 0.7 0.7 1")


def _add_load(model: ET.Element, system: SystemParams, hover) -> None:
    load = system.load
    link = _element(model, "link", name=LOAD_LINK)
    _inertial(link, load.mass, load.inertia_matrix())
    _shape(link, "collision", "collision", _box(load.size))
    _shape(link, "visual", "visual", _box(load.size), color="0.55 0.35 0.2 1")
    for i, rho in enumerate(system.attachment_array()):
        _shape(
            link,
            "visual",
            f"attachment_{i + 1}",
            ("sphere", {"radius": _num(0.015)}),
            pose=_pose(rho),
            color="0.9 0.1 0.1 1",
        )
    _plugin(
        model,
        "load_odometry",
        f"{PLUGIN_PREFIX}odometry_plugin.so",
        _odometry_params(LOAD_NAMESPACE, LOAD_LINK, LOAD_ODOMETRY),
    )


def _add_quadrotor(
    model: ET.Element, quad: QuadrotorParams, namespace: str, position, rotation: np.ndarray
) -> None:
    body = base_link(namespace)
    mass, inertia = body_mass_properties(quad)
    link = _element(model, "link", name=body)
    _element(link, "pose", _pose(position, rotation))
    _inertial(link, mass, inertia)
    _shape(link, "collision", "collision", _box(BODY_SIZE))
    _shape(link, "visual", "visual", _box(BODY_SIZE), color="0.2 0.2 0.2 1")
    arm = 2.0 * quad.rotor.arm_length
    for name, yaw in (("arm_a", math.pi / 4.0), ("arm_b", -math.pi / 4.0)):
        _shape(
            link,
            "visual",
            name,
            _box((arm, 0.015, 0.01)),
            pose=f"0 0 0 0 0 {_num(yaw)}",
            color="0.2 0.2 0.2 1",
        )

    rotor = quad.rotor
    moment_constant = rotor.torque_coeff / rotor.thrust_coeff
    for m, (offset, spin) in enumerate(zip(rotor.rotor_positions(), rotor.spin_directions())):
        link = _element(model, "link", name=rotor_link(namespace, m))
        _element(link, "pose", _pose(np.asarray(position) + rotation @ offset, rotation))
        _inertial(link, ROTOR_MASS, rotor_inertia())
        disc = _cylinder(ROTOR_RADIUS, 0.005)
        _shape(link, "collision", "collision", disc)
        _shape(link, "visual", "visual", disc, color="0.8 0.1 0.1 0.6" if m in (0, 2) else "0.1 0.1 0.8 0.6")
        joint = _element(model, "joint", name=rotor_joint(namespace, m), type="revolute")
        _element(joint, "parent", body)
        _element(joint, "child", rotor_link(namespace, m))
        axis = _element(joint, "axis")
        _element(axis, "xyz", "0 0 1")
        limit = _element(axis, "limit")
        _element(limit, "lower", -1e16)
        _element(limit, "upper", 1e16)
        # RotorS: drag torque = -turningDirection * thrust * momentConstant about the rotor axis,
        # with cw = -1, so a rotor whose torque acts along +z (spin +1) turns clockwise
        _plugin(
            model,
            f"{namespace}_rotor_{m}_motor_model",
            f"{PLUGIN_PREFIX}motor_model.so",
            {
                "robotNamespace": namespace,
                "jointName": rotor_joint(namespace, m),
                "linkName": rotor_link(namespace, m),
                "turningDirection": "cw" if spin > 0 else "ccw",
                "motorType": "velocity",
                "timeConstantUp": rotor.time_constant,
                "timeConstantDown": rotor.time_constant,
                "maxRotVelocity": rotor.speed_max,
                "motorConstant": rotor.thrust_coeff,
                "momentConstant": moment_constant,
                "commandSubTopic": MOTOR_COMMAND_GAZEBO_TOPIC,
                "motorNumber": str(m),
                "rotorDragCoefficient": ROTOR_DRAG_COEFFICIENT,
                "rollingMomentCoefficient": ROLLING_MOMENT_COEFFICIENT,
                "motorSpeedPubTopic": f"motor_speed/{m}",
                "rotorVelocitySlowdownSim": ROTOR_VELOCITY_SLOWDOWN_SIM,
            },
        )

    _plugin(
        model,
        f"{namespace}_multirotor_base_plugin",
        f"{PLUGIN_PREFIX}multirotor_base_plugin.so",
        {
            "robotNamespace": namespace,
            "linkName": body,
            "rotorVelocitySlowdownSim": ROTOR_VELOCITY_SLOWDOWN_SIM,
        },
    )
    _plugin(
        model,
        f"{namespace}_controller_interface",
        f"{PLUGIN_PREFIX}controller_interface.so",
        {
            "robotNamespace": namespace,
            "commandMotorSpeedSubTopic": MOTOR_COMMAND_TOPIC,
            "motorSpeedCommandPubTopic": MOTOR_COMMAND_GAZEBO_TOPIC,
        },
    )
    _plugin(
        model,
        f"{namespace}_imu",
        f"{PLUGIN_PREFIX}imu_plugin.so",
        {"robotNamespace": namespace, "linkName": body, "imuTopic": IMU_TOPIC, **IMU_NOISE},
    )
    _plugin(
        model,
        f"{namespace}_odometry",
        f"{PLUGIN_PREFIX}odometry_plugin.so",
        _odometry_params(namespace, body, QUAD_ODOMETRY_TOPIC),
    )


def _add_cable(model: ET.Element, system: SystemParams, i: int, hover, segments: int, namespace: str) -> None:
    length = system.cables[i].length
    quad = system.quadrotors[i]
    R_load = quat_to_matrix(hover.load_q)
    R_quad = quat_to_matrix(hover.uav_q[i])
    load_end = hover.load_p + R_load @ system.attachment_array()[i]
    quad_end = hover.uav_p[i] + R_quad @ np.asarray(quad.attachment)
    span = float(np.linalg.norm(quad_end - load_end))
    if abs(span - length) > 1e-9:
        raise RuntimeError(
            f"cable {i + 1}: hover ends {span!r} m apart, expected its length "
            f"{length!r} m (rigid-cable hover)"
        )
    direction = (quad_end - load_end) / span
    rotation = _rotation_with_z(direction)
    piece = length / segments
    mass = cable_mass(system, i) / segments
    for k in range(segments):
        link = _element(model, "link", name=cable_link(i, k))
        _element(link, "pose", _pose(load_end + k * piece * direction, rotation))
        _inertial(link, mass, _segment_inertia(mass, piece), position=(0.0, 0.0, 0.5 * piece))
        _shape(
            link,
            "visual",
            "visual",
            _cylinder(CABLE_RADIUS, piece),
            pose=_pose((0.0, 0.0, 0.5 * piece)),
            color="0.9 0.9 0.1 1",
        )
    for k in range(segments + 1):
        joint = _element(model, "joint", name=cable_joint(i, k), type="ball")
        _element(joint, "parent", LOAD_LINK if k == 0 else cable_link(i, k - 1))
        _element(joint, "child", base_link(namespace) if k == segments else cable_link(i, k))
        if k == segments:  # in the quadrotor's body frame: its attachment point r_i
            _element(joint, "pose", _pose(quad.attachment))


def world_sdf(
    config: Config, cable_segments: int = DEFAULT_CABLE_SEGMENTS, load_position=DEFAULT_LOAD_POSITION
) -> str:
    """The SDF world (text) of ``config``'s simulated system hovering around a level load at
    ``load_position`` (m, world), each cable a chain of ``cable_segments`` links."""
    if isinstance(cable_segments, bool) or not isinstance(cable_segments, int) or cable_segments < 1:
        raise UsageError(f"cable_segments: expected an integer >= 1, got {cable_segments!r}")
    position = np.asarray(load_position, dtype=float)
    if position.shape != (3,) or not np.isfinite(position).all():
        raise UsageError(f"load_position: expected 3 finite numbers (m), got {load_position!r}")
    system = config.mismatch.apply(config.system)
    hover = rigid_cable_hover(system)
    namespaces = quad_namespaces(system.n_uavs)

    root = ET.Element("sdf", version=SDF_VERSION)
    root.append(
        ET.Comment(
            f" cableload gazebo-world: {system.n_uavs} quadrotors on {cable_segments}-link cables "
            f"around a {system.load.mass:g} kg load. Needs RotorS's plugins on GAZEBO_PLUGIN_PATH. "
        )
    )
    world = _element(root, "world", name=WORLD_NAME)
    _add_environment(world, config, system)
    model = _element(world, "model", name=MODEL_NAME)
    _element(model, "pose", _pose(position))  # the load's pose; links in the load's frame
    _add_load(model, system, hover)
    for i, (quad, namespace) in enumerate(zip(system.quadrotors, namespaces)):
        _add_quadrotor(model, quad, namespace, hover.uav_p[i], quat_to_matrix(hover.uav_q[i]))
    for i, namespace in enumerate(namespaces):
        _add_cable(model, system, i, hover, cable_segments, namespace)
    ET.indent(root, space="  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_world(config: Config, path, overwrite: bool = False, **options) -> Path:
    """Write ``world_sdf(config, **options)`` to ``path`` atomically (a temporary file beside it,
    then renamed); an existing file is an error unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"world file {str(path)!r} exists already; choose another path or overwrite it (--overwrite)"
        )
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {str(path.parent)!r} of the world file does not exist")
    atomic_write_bytes(path, world_sdf(config, **options).encode())
    return path
