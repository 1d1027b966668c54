"""The Gazebo world: the real SDFormat parser reads it without errors, and what it reads is the
configured system (masses, inertias, cable lengths, attachment points, rotor constants).

Everything below is checked on the parser's output (poses resolved by SDFormat's frame graph),
not on the generator's own numbers. Without SDFormat 12, g++ and pkg-config these tests skip,
naming the packages to install; in CI (``CI`` set) they fail instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from requirements import in_ci, require

from backends import sdfcheck
from backends.gazebo_world import (
    DEFAULT_CABLE_MASS,
    DEFAULT_CABLE_SEGMENTS,
    DEFAULT_LOAD_POSITION,
    LOAD_LINK,
    LOAD_NAMESPACE,
    MODEL_NAME,
    base_link,
    cable_joint,
    cable_link,
    quad_namespaces,
    rotor_joint,
    rotor_link,
    world_sdf,
    write_world,
)
from cableload_sim.errors import UsageError
from cableload_sim.io.runlog import LOAD_ODOMETRY_TOPIC
from cableload_sim.params import load_config
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.rotations import quat_to_matrix

MM = 1e-3


@pytest.fixture(scope="session")
def checker(tmp_path_factory):
    reason = sdfcheck.missing_requirements()
    require(reason is None, reason or "")
    return sdfcheck.build_checker(tmp_path_factory.mktemp("sdfcheck"))


def _parse(checker, config, path, **options):
    write_world(config, path, **options)
    report = sdfcheck.check_sdf(path, strict=True, checker=checker)
    assert report.errors == (), "\n".join(report.errors)
    return report


@pytest.fixture(scope="module", params=[3, 6], ids=lambda n: f"n{n}")
def parsed(request, checker, tmp_path_factory):
    """(config, parsed multilift model, report) for n quadrotors."""
    config = load_config(None, uavs=request.param)
    path = tmp_path_factory.mktemp(f"world{request.param}") / "multilift.world"
    report = _parse(checker, config, path)
    return config, report.model(MODEL_NAME), report


# ---------------------------------------------------------------------------------------------
# helpers on the parser's output


def _frame(pose) -> tuple[np.ndarray, np.ndarray]:
    """(position, rotation matrix) of a parsed pose [x, y, z, qw, qx, qy, qz]."""
    return np.array(pose[:3]), quat_to_matrix(np.array(pose[3:]))


def _in_world(model: dict, pose) -> tuple[np.ndarray, np.ndarray]:
    p_model, R_model = _frame(model["pose"])
    p, R = _frame(pose)
    return p_model + R_model @ p, R_model @ R


def _links(model: dict) -> dict:
    return {link["name"]: link for link in model["links"]}


def _joints(model: dict) -> dict:
    return {joint["name"]: joint for joint in model["joints"]}


def _inertia_matrix(values) -> np.ndarray:
    ixx, iyy, izz, ixy, ixz, iyz = values
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _composite(model: dict, names: list[str]) -> tuple[float, np.ndarray, np.ndarray]:
    """Total mass, centre of mass (world) and inertia about it (world axes) of rigid links."""
    masses, centres, inertias = [], [], []
    for link in (_links(model)[name] for name in names):
        p, R = _in_world(model, link["pose"])
        c_in, R_in = _frame(link["inertial_pose"])
        R_inertial = R @ R_in
        masses.append(link["mass"])
        centres.append(p + R @ c_in)
        inertias.append(R_inertial @ _inertia_matrix(link["inertia"]) @ R_inertial.T)
    mass = float(sum(masses))
    centre = sum(m * c for m, c in zip(masses, centres)) / mass
    total = np.zeros((3, 3))
    for m, c, inertia in zip(masses, centres, inertias):
        d = c - centre
        total += inertia + m * (d @ d * np.eye(3) - np.outer(d, d))
    return mass, centre, total


def _plugins(model: dict, library_suffix: str) -> list[dict]:
    return [p for p in model["plugins"] if p["filename"].endswith(library_suffix)]


# ---------------------------------------------------------------------------------------------
# the world parses, and is the configured system


def test_world_parses_with_sdformat(parsed):
    config, model, report = parsed
    n, k = config.system.n_uavs, DEFAULT_CABLE_SEGMENTS
    assert report.errors == ()
    assert report.summary["sdf_version"] == "1.7"
    world = report.worlds()[0]
    assert world["max_step_size"] == config.simulation.physics_dt
    np.testing.assert_allclose(world["gravity"], [0.0, 0.0, -config.system.gravity])
    assert {m["name"] for m in world["models"]} == {"ground_plane", MODEL_NAME}
    assert [p["filename"] for p in world["plugins"]] == ["librotors_gazebo_ros_interface_plugin.so"]
    # load + per quadrotor a body and 4 rotors + per cable k segments
    assert len(model["links"]) == 1 + 5 * n + k * n
    assert len(model["joints"]) == 4 * n + (k + 1) * n


def test_load_mass_and_inertia_are_the_configs(parsed):
    config, model, _ = parsed
    load = _links(model)[LOAD_LINK]
    # the model's pose is the load's (what /gazebo/set_model_state of the model sets)
    np.testing.assert_allclose(model["pose"], [*DEFAULT_LOAD_POSITION, 1, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(load["pose"], [0, 0, 0, 1, 0, 0, 0], atol=1e-15)
    assert load["mass"] == pytest.approx(config.system.load.mass, rel=1e-12)
    np.testing.assert_allclose(
        _inertia_matrix(load["inertia"]), config.system.load.inertia_matrix(), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(load["inertial_pose"], [0, 0, 0, 1, 0, 0, 0], atol=1e-15)


def test_quadrotors_have_the_configured_mass_and_inertia(parsed):
    """Body and rotors together: the configured mass, centre of gravity at the body origin and
    the configured inertia about it in the body frame."""
    config, model, _ = parsed
    total = 0.0
    for quad, ns in zip(config.system.quadrotors, quad_namespaces(config.system.n_uavs)):
        names = [base_link(ns)] + [rotor_link(ns, m) for m in range(4)]
        mass, centre, inertia = _composite(model, names)
        p_body, R_body = _in_world(model, _links(model)[base_link(ns)]["pose"])
        assert mass == pytest.approx(quad.mass, rel=1e-12)
        np.testing.assert_allclose(centre, p_body, atol=1e-12)
        np.testing.assert_allclose(R_body.T @ inertia @ R_body, quad.inertia_matrix(), atol=1e-12)
        total += mass
    assert total == pytest.approx(sum(q.mass for q in config.system.quadrotors), rel=1e-12)


def test_cables_are_link_chains_of_the_configured_length_between_the_attachment_points(parsed):
    config, model, _ = parsed
    system = config.system
    links, joints = _links(model), _joints(model)
    k = DEFAULT_CABLE_SEGMENTS
    p_load, R_load = _in_world(model, links[LOAD_LINK]["pose"])
    directions = hover_geometry(system).directions  # the level load's hover cone, load frame
    for i, ns in enumerate(quad_namespaces(system.n_uavs)):
        chain = [joints[cable_joint(i, node)] for node in range(k + 1)]
        assert [j["type"] for j in chain] == ["ball"] * (k + 1)
        assert [j["parent"] for j in chain] == [LOAD_LINK] + [cable_link(i, s) for s in range(k)]
        assert [j["child"] for j in chain] == [cable_link(i, s) for s in range(k)] + [base_link(ns)]
        nodes = np.array([_in_world(model, j["pose"])[0] for j in chain])
        length = np.linalg.norm(np.diff(nodes, axis=0), axis=1).sum()
        assert abs(length - system.cables[i].length) < MM, f"cable {i + 1}: {length} m"
        # each segment's own frame starts at its joint, so links and joints agree
        for s in range(k):
            np.testing.assert_allclose(
                _in_world(model, links[cable_link(i, s)]["pose"])[0], nodes[s], atol=1e-12
            )
        load_end = p_load + R_load @ np.array(system.load.attachments[i])
        assert np.linalg.norm(nodes[0] - load_end) < MM
        p_body, R_body = _in_world(model, links[base_link(ns)]["pose"])
        quad_end = p_body + R_body @ np.array(system.quadrotors[i].attachment)
        assert np.linalg.norm(nodes[-1] - quad_end) < MM
        # straight along the hover direction: the initial pose is the hover formation
        np.testing.assert_allclose((nodes[-1] - nodes[0]) / length, R_load @ directions[i], atol=1e-9)
        cable_mass = sum(links[cable_link(i, s)]["mass"] for s in range(k))
        assert cable_mass == pytest.approx(DEFAULT_CABLE_MASS, rel=1e-12)


def test_quadrotors_start_tilted_to_balance_their_cable(parsed):
    """Hover: each thrust axis carries the quadrotor's weight plus its cable's pull."""
    config, model, _ = parsed
    system = config.system
    geometry = hover_geometry(system)
    links = _links(model)
    for i, ns in enumerate(quad_namespaces(system.n_uavs)):
        _, R_body = _in_world(model, links[base_link(ns)]["pose"])
        force = (
            system.quadrotors[i].mass * system.gravity * np.array([0.0, 0.0, 1.0])
            + geometry.tensions[i] * geometry.directions[i]
        )
        np.testing.assert_allclose(R_body[:, 2], force / np.linalg.norm(force), atol=1e-9)


def test_rotor_plugins_drive_the_right_joints_with_the_configs_constants(parsed):
    config, model, _ = parsed
    links, joints = _links(model), _joints(model)
    motors = _plugins(model, "motor_model.so")
    assert len(motors) == 4 * config.system.n_uavs
    for quad, ns in zip(config.system.quadrotors, quad_namespaces(config.system.n_uavs)):
        rotor = quad.rotor
        p_body, R_body = _in_world(model, links[base_link(ns)]["pose"])
        for m, (offset, spin) in enumerate(zip(rotor.rotor_positions(), rotor.spin_directions())):
            (plugin,) = [p for p in motors if p["params"]["jointName"] == rotor_joint(ns, m)]
            params = plugin["params"]
            joint = joints[params["jointName"]]
            assert (joint["type"], joint["parent"], joint["child"]) == (
                "revolute",
                base_link(ns),
                params["linkName"],
            )
            np.testing.assert_allclose(joint["axis"], [0.0, 0.0, 1.0])
            # the rotor sits where the config's allocation matrix puts it
            p_joint, R_joint = _in_world(model, joint["pose"])
            np.testing.assert_allclose(p_joint, p_body + R_body @ offset, atol=1e-12)
            np.testing.assert_allclose(R_joint[:, 2], R_body[:, 2], atol=1e-12)
            assert params["robotNamespace"] == ns
            assert int(params["motorNumber"]) == m
            assert float(params["motorConstant"]) == rotor.thrust_coeff
            assert float(params["momentConstant"]) == pytest.approx(
                rotor.torque_coeff / rotor.thrust_coeff, rel=1e-15
            )
            assert float(params["maxRotVelocity"]) == rotor.speed_max
            assert float(params["timeConstantUp"]) == rotor.time_constant
            assert float(params["timeConstantDown"]) == rotor.time_constant
            # RotorS: drag torque along -turningDirection * z, cw = -1
            assert params["turningDirection"] == ("cw" if spin > 0 else "ccw")
            for name in (
                "commandSubTopic",
                "motorSpeedPubTopic",
                "rotorDragCoefficient",
                "rollingMomentCoefficient",
                "rotorVelocitySlowdownSim",
            ):
                assert params[name] != "", name


def test_every_plugin_names_a_link_or_joint_of_the_model(parsed):
    config, model, _ = parsed
    links, joints = _links(model), _joints(model)
    for plugin in model["plugins"]:
        params = plugin["params"]
        if "linkName" in params:
            assert params["linkName"] in links, plugin["name"]
        if "jointName" in params:
            assert params["jointName"] in joints, plugin["name"]
    for ns in quad_namespaces(config.system.n_uavs):
        for suffix in (
            "multirotor_base_plugin.so",
            "imu_plugin.so",
            "odometry_plugin.so",
            "controller_interface.so",
        ):
            assert [p["params"]["robotNamespace"] for p in _plugins(model, suffix)].count(ns) == 1
        for suffix in ("multirotor_base_plugin.so", "imu_plugin.so", "odometry_plugin.so"):
            (plugin,) = [p for p in _plugins(model, suffix) if p["params"]["robotNamespace"] == ns]
            assert plugin["params"]["linkName"] == base_link(ns)
    (load,) = [
        p for p in _plugins(model, "odometry_plugin.so") if p["params"]["robotNamespace"] == LOAD_NAMESPACE
    ]
    assert load["params"]["linkName"] == LOAD_LINK
    assert f"/{LOAD_NAMESPACE}/{load['params']['odometryTopic']}" == LOAD_ODOMETRY_TOPIC


def test_world_is_the_simulated_system_with_its_mismatch(checker, tmp_path):
    """Like the embedded simulator, the world carries the config's [mismatch]."""
    toml = tmp_path / "mismatch.toml"
    toml.write_text(
        "[load]\nmass = 1.4\nattachments = [[0.26, 0.22, 0.06], [0.26, -0.22, 0.06], "
        "[-0.28, 0.0, 0.06]]\n[mismatch]\nload_mass_scale = 1.25\n"
        "cable_length_deltas = [0.0, 0.1, -0.05]\n"
    )
    config = load_config(toml)
    segments = 4
    model = _parse(checker, config, tmp_path / "w.world", cable_segments=segments).model(MODEL_NAME)
    assert _links(model)[LOAD_LINK]["mass"] == pytest.approx(1.75, rel=1e-12)
    for i, expected in enumerate((1.0, 1.1, 0.95)):
        nodes = np.array(
            [_in_world(model, _joints(model)[cable_joint(i, s)]["pose"])[0] for s in range(segments + 1)]
        )
        assert abs(np.linalg.norm(np.diff(nodes, axis=0), axis=1).sum() - expected) < MM


# ---------------------------------------------------------------------------------------------
# the check can fail


def test_checker_reports_a_joint_without_its_child(checker, tmp_path):
    text = world_sdf(load_config(None))
    broken_joint = f"<child>{cable_link(0, 3)}</child>"
    assert text.count(broken_joint) == 1
    path = tmp_path / "broken.world"
    path.write_text(text.replace(broken_joint, "<child>cable1/no_such_segment</child>"))
    report = sdfcheck.check_sdf(path, checker=checker)
    assert report.errors, "SDFormat accepted a joint whose child link does not exist"
    assert any("no_such_segment" in error for error in report.errors)


def test_checker_reports_an_unknown_element_when_strict(checker, tmp_path):
    text = world_sdf(load_config(None)).replace(
        "<max_step_size>", "<max_stepsize>1</max_stepsize><max_step_size>", 1
    )
    path = tmp_path / "typo.world"
    path.write_text(text)
    assert sdfcheck.check_sdf(path, strict=False, checker=checker).errors == ()
    assert any("max_stepsize" in e for e in sdfcheck.check_sdf(path, checker=checker).errors)


# ---------------------------------------------------------------------------------------------
# without SDFormat; files; options; command line (no parser needed)


def test_missing_tools_name_the_packages_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "")
    reason = sdfcheck.missing_requirements()
    assert "apt-get install libsdformat-dev g++ pkg-config" in reason
    with pytest.raises(sdfcheck.SdfCheckError, match="apt-get install libsdformat-dev"):
        sdfcheck.build_checker()


@pytest.mark.parametrize(
    "ci, fails", [(None, False), ("", False), ("0", False), ("false", False), ("1", True), ("true", True)]
)
def test_require_skips_outside_ci_and_fails_in_ci(monkeypatch, ci, fails):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert in_ci() is fails
    require(True, "never reported")
    expected = pytest.fail.Exception if fails else pytest.skip.Exception
    with pytest.raises(expected, match="needs libfoo"):
        require(False, "needs libfoo")


def test_write_world_is_atomic_and_refuses_to_overwrite(tmp_path, paper_config):
    path = tmp_path / "multilift.world"
    write_world(paper_config, path)
    first = path.read_text()
    with pytest.raises(FileExistsError, match="exists already"):
        write_world(paper_config, path, cable_segments=3)
    assert path.read_text() == first
    write_world(paper_config, path, overwrite=True, cable_segments=3)
    assert path.read_text() == world_sdf(paper_config, cable_segments=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["multilift.world"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"cable_segments": 0}, "cable_segments: expected an integer >= 1, got 0"),
        ({"cable_segments": 2.5}, "got 2.5"),
        ({"load_position": (0.0, 1.0)}, "load_position: expected 3 finite numbers"),
    ],
)
def test_bad_options_name_the_value(paper_config, options, message):
    with pytest.raises(UsageError, match=message.replace(".", r"\.").replace("(", r"\(")):
        world_sdf(paper_config, **options)


def test_command_line_writes_the_world(tmp_path, capsys):
    from cableload_sim.cli import main

    out = tmp_path / "multilift.world"
    assert main(["gazebo-world", "--uavs", "4", "--cable-segments", "5", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_text() == world_sdf(load_config(None, uavs=4), cable_segments=5)
    assert main(["gazebo-world", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists already" in err
    assert main(["gazebo-world", "--cable-segments", "0", "-o", str(tmp_path / "x.world")]) == 2
    assert "cable_segments: expected an integer >= 1, got 0" in capsys.readouterr().err
