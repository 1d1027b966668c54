"""Parameters from TOML: the paper's setup, any number of quadrotors, clear errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.params import (
    ConfigError,
    MismatchParams,
    config_from_dict,
    load_config,
)


def test_paper_setup_values(paper_config):
    system = paper_config.system
    assert system.n_uavs == 3
    assert system.load.mass == pytest.approx(1.4)
    assert np.allclose(
        system.attachment_array(), [[0.26, 0.22, 0.06], [0.26, -0.22, 0.06], [-0.28, 0.0, 0.06]]
    )
    for quad, cable in zip(system.quadrotors, system.cables):
        assert quad.mass == pytest.approx(0.6)
        assert quad.rotor.max_thrust() == pytest.approx(20.0)
        assert quad.attachment == pytest.approx((0.0, 0.0, -0.03))
        assert cable.length == pytest.approx(1.0)
    # total mass 1.4 + 3 x 0.6
    assert system.total_mass() == pytest.approx(3.2)


def test_derived_values_follow_overrides(paper_config):
    """Derived quantities are methods: changing the mass changes the box inertia."""
    load = paper_config.system.load
    heavier = dataclasses.replace(load, mass=2.8)
    assert np.allclose(heavier.inertia_matrix(), 2.0 * load.inertia_matrix())
    a, b, c = load.size
    assert load.inertia_matrix()[2, 2] == pytest.approx(load.mass * (a * a + b * b) / 12.0)


def test_allocation_matrix_maps_rotor_thrusts(paper_config):
    rotor = paper_config.system.quadrotors[0].rotor
    alloc = rotor.allocation_matrix()
    # equal thrusts: pure collective thrust, no torque
    assert np.allclose(alloc @ np.full(4, 2.0), [8.0, 0.0, 0.0, 0.0])
    # front rotors (x > 0) harder: nose-up torque is negative about y (tau_y = -x f)
    pos = rotor.rotor_positions()
    front = (pos[:, 0] > 0).astype(float)
    assert (alloc @ front)[2] < 0.0
    assert np.linalg.matrix_rank(alloc) == 4


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_any_number_of_uavs_on_a_regular_polygon(n):
    config = load_config(uavs=n)
    rho = config.system.attachment_array()
    assert config.system.n_uavs == n
    if n != 3:
        radius = np.linalg.norm(rho[:, :2], axis=1)
        assert np.allclose(radius, radius[0])
        # neighbours equally spaced in angle
        angles = np.sort(np.arctan2(rho[:, 1], rho[:, 0]) % (2 * np.pi))
        assert np.allclose(np.diff(angles), 2 * np.pi / n)


def test_uavs_from_toml_polygon():
    config = config_from_dict({"load": {"uavs": 4, "attachment_radius": 0.4}})
    assert config.system.n_uavs == 4
    assert np.allclose(np.linalg.norm(config.system.attachment_array()[:, :2], axis=1), 0.4)


@pytest.mark.parametrize(
    "data, match",
    [
        ({"load": {"mass": -1.0}}, r"load\.mass: expected a positive number, got -1\.0"),
        ({"cable": {"length": 0.0}}, r"cable\.length: expected a positive number, got 0\.0"),
        ({"cable": {"length": -0.5}}, r"cable\.length.*-0\.5"),
        (
            {"load": {"uavs": 4, "attachments": [[0, 0, 0], [1, 0, 0], [0, 1, 0]]}},
            r"load\.attachments: expected 4 points.*got 3",
        ),
        ({"load": {"mas": 1.0}}, r"unknown key 'mas'"),
        ({"quadrotor": {"mass": "heavy"}}, r"quadrotor\.mass: expected a positive number, got 'heavy'"),
        ({"quadrotor": {"mass": True}}, r"quadrotor\.mass: expected a positive number, got True"),
        ({"quadrotor": {"inertia": [1.0, 2.0]}}, r"quadrotor\.inertia: expected a list of 3"),
        ({"quadrotor": {"rotor": {"speed_min": 3000.0}}}, r"speed_min: expected less than"),
        ({"simulation": {"physics_dt": 0.01}}, r"physics_dt: expected at most 0\.002"),
        ({"controller": {"kp": [1, 2, "x"]}}, r"controller\.kp\[2\]: expected a positive number"),
        ({"cable": {"stiffness": float("nan")}}, r"cable\.stiffness: expected a positive number, got nan"),
        ({"load": {"uavs": 1}}, r"load\.uavs: expected an integer from 2 to 64, got 1"),
        ({"mismatch": {"cable_length_deltas": [0.1, 0.2]}}, r"expected 3 values.*got 2"),
        ({"unknown_table": {}}, r"unknown key 'unknown_table'"),
        # sizes the machine cannot run are refused with the number they would need
        (
            {"simulation": {"physics_dt": 1e-9}},
            r"physics_dt: expected at least 1e-05 s, got 1e-09: that step needs 1e\+09 physics "
            r"steps per simulated second",
        ),
        (
            {"simulation": {"planner_rate_hz": 1e-3}},
            r"planner_rate_hz: expected at least 0\.5\d* Hz \(a plan lasts 1\.9\d s",
        ),
        ({"simulation": {"log_rate_hz": 5.0}}, r"log_rate_hz: expected at least planner_rate_hz"),
        (
            {"controller": {"rate_hz": 300.0}},
            r"controller\.rate_hz: 300\.0 Hz is not a whole "
            r"fraction of the physics rate 1000 Hz",
        ),
        ({"simulation": {"planner_rate_hz": 30.0}}, r"planner_rate_hz: 30\.0 Hz is not a whole"),
        ({"load": {"uavs": 65}}, r"load\.uavs: expected an integer from 2 to 64, got 65"),
        ({"teacher": {"prior": "follow"}}, r"teacher\.prior: expected one of 'tilt', 'wrench', got 'follow'"),
        (
            {"load": {"attachments": [[0.1, 0.1, 0.06]] * 3}},
            r"load\.attachments: points 0 and 1 coincide at \[0\.1, 0\.1, 0\.06\] m; expected "
            r"distinct points",
        ),
    ],
)
def test_invalid_config_names_field_value_and_expectation(data, match):
    data = {"load": {}, **data} if "load" not in data else data
    with pytest.raises(ConfigError, match=match):
        config_from_dict(data)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[load\nmass = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_a_config_that_is_not_text_is_refused_with_its_name(tmp_path, rng):
    noise = tmp_path / "noise.toml"
    noise.write_bytes(b"\x99" + rng.bytes(4000))
    with pytest.raises(ConfigError, match=r"noise\.toml' is not UTF-8 text"):
        load_config(noise)
    with pytest.raises(ConfigError, match=r"'/dev/zero' is not a regular file"):
        load_config("/dev/zero")  # never read: it has no end
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_config(tmp_path)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * (2 << 20))
    with pytest.raises(ConfigError, match="larger than"):
        load_config(huge)


def test_config_errors_are_usage_errors():
    from cableload_sim.errors import UsageError

    with pytest.raises(UsageError) as caught:
        config_from_dict({"load": {"mass": -1.0}})
    assert caught.value.exit_status == 2 and isinstance(caught.value, ValueError)
    with pytest.raises(ConfigError, match="uavs: expected an integer from 2 to 64"):
        load_config(uavs=1000)


def test_mismatch_changes_only_the_simulated_system(paper_config):
    mismatch = MismatchParams(
        load_mass_scale=2.0,
        attachment_offsets=((0.02, 0.0, 0.0), (0.0, 0.02, 0.0), (0.0, 0.0, 0.0)),
        cable_length_deltas=(0.035, -0.035, 0.0),
    )
    simulated = mismatch.apply(paper_config.system)
    assert simulated.load.mass == pytest.approx(2.8)
    assert np.allclose(simulated.load.inertia_matrix(), 2.0 * paper_config.system.load.inertia_matrix())
    assert simulated.cables[0].length == pytest.approx(1.035)
    assert simulated.cables[1].length == pytest.approx(0.965)
    assert simulated.load.attachments[0][0] == pytest.approx(0.28)
    assert paper_config.system.load.mass == pytest.approx(1.4)  # nominal untouched


def test_a_config_extends_another_and_shipped_configs_load_by_name(tmp_path):
    """``extends``: a shipped configuration or a file beside it, with only the changes given;
    ``--config NAME`` for the shipped ones."""
    base = tmp_path / "base.toml"
    base.write_text('extends = "paper"\n[load]\nmass = 1.2\n[cable]\nlength = 1.1\n')
    child = tmp_path / "sub" / "child.toml"
    child.parent.mkdir()
    child.write_text('extends = "../base.toml"\n[cable]\nlength = 1.05\n')
    config = load_config(child)
    assert config.system.load.mass == pytest.approx(1.2)  # from base.toml
    assert config.system.cables[0].length == pytest.approx(1.05)  # its own
    assert config.system.quadrotors[0].mass == pytest.approx(0.6)  # from paper.toml
    assert load_config(child, overrides=["load.mass=1.3"]).system.load.mass == pytest.approx(1.3)
    assert load_config("paper") == load_config() == load_config("paper.toml")
    assert load_config("paper-conditions").sensing.enabled and not load_config().sensing.enabled


@pytest.mark.parametrize(
    "files, match",
    [
        ({"loop.toml": 'extends = "loop.toml"\n'}, "extends itself"),
        ({"bad.toml": "extends = 3\n"}, r"bad.toml:extends: expected the name or path .* got 3"),
        (
            {"missing.toml": 'extends = "nope.toml"\n'},
            r"missing.toml:extends: 'nope.toml': the file .*nope.toml' does not exist",
        ),
        (
            {
                "bad_base.toml": 'extends = "paper"\n[load]\nmass = -1.0\n',
                "bad_child.toml": 'extends = "bad_base.toml"\n',
            },
            r"bad_child.toml \(extending .*bad_base.toml \(extending paper.toml\)\)",
        ),
        ({"typo.toml": 'extends = "paper"\n[cable]\nlenght = 1.0\n'}, "lenght"),
    ],
)
def test_a_bad_extending_config_is_refused_naming_it(tmp_path, files, match):
    """A cycle, a bad ``extends``, a missing base, an error in a base (named with the chain)
    and an unknown key under ``extends`` (the last file written is the one loaded)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(tmp_path / list(files)[-1])


def test_an_unknown_configuration_name_is_refused():
    with pytest.raises(
        ConfigError, match=r"'paper-condition' does not exist; expected a TOML file or one of"
    ):
        load_config("paper-condition")


def test_a_file_of_a_shipped_configurations_name_comes_first_where_it_is_named(tmp_path, monkeypatch):
    """``extends = "paper.toml"`` beside a file of that name extends the file; a shipped
    configuration extends shipped ones only, whatever the working folder holds."""
    (tmp_path / "paper.toml").write_text('extends = "paper"\n[load]\nmass = 1.9\n')
    child = tmp_path / "child.toml"
    child.write_text('extends = "paper.toml"\n')
    assert load_config(child).system.load.mass == pytest.approx(1.9)
    assert load_config(tmp_path / "paper.toml").system.load.mass == pytest.approx(1.9)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "paper").write_text("")  # a stray file named like a shipped config
    assert load_config("paper-conditions").system.load.mass == pytest.approx(1.4)
    assert load_config("paper.toml").system.load.mass == pytest.approx(1.9)  # the file here first
