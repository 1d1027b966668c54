"""The ROS1 layer's messages and conversions: classes built from the shipped text carry the real
packages' MD5 sums; conversions keep frames and units."""

from __future__ import annotations

import io

import numpy as np
import pytest
from requirements import require

from backends import ros1
from cableload_sim.horizon import node_times
from cableload_sim.io.runlog import message_md5
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.trajectories import make_reference

ok, why = ros1.ros_available()
require(ok, why)

# MD5 sums of the real packages' generated code (Agilicious' agiros_msgs and its dodgeros twin,
# gazebo_ros_pkgs' gazebo_msgs), as their generators printed them
REAL_MD5 = {
    "QuadState": "64abc96085c98da0b390e079b723be37",
    "Command": "4d577bccd8c13adfb614a4c929e12409",
    "Reference": "e374aa4139d56741a12f70c4fa22044e",
    "Telemetry": "5251574f675e7717477eef1003887d54",
    "ModelState": "9330fd35f2fcd82d457e54bd54e10593",
    "SetModelState": "5b3ab0281d4f5445def017e3a2e4a07b",
}


@pytest.mark.parametrize("name", sorted(REAL_MD5))
def test_shipped_types_have_the_real_md5(name):
    cls = getattr(ros1.messages(), name)
    assert cls._md5sum == REAL_MD5[name]


@pytest.mark.parametrize(
    "name",
    [
        "agiros_msgs/QuadState",
        "agiros_msgs/Reference",
        "agiros_msgs/Telemetry",
        "gazebo_msgs/ModelState",
        "cableload_msgs/CableTension",
    ],
)
def test_run_time_classes_agree_with_the_run_log_type_store(name):
    """genpy (live ROS) and rosbags (run logs) read the same text the same way."""
    assert getattr(ros1.messages(), name.split("/")[1])._md5sum == message_md5(name)


def test_debian_standard_types_are_used_as_they_are():
    from nav_msgs.msg import Odometry

    m = ros1.messages()
    assert m.Odometry is Odometry
    assert m.Odometry._md5sum == "cd5e73d190d741a2f92e81eda573aca7"
    assert m.PoseStamped._md5sum == "d3812c3cbc69362b77dc0b19b345f8f5"


def roundtrip(msg):
    buffer = io.BytesIO()
    msg.serialize(buffer)
    copy = type(msg)()
    copy.deserialize(buffer.getvalue())
    return copy


def test_odometry_twist_is_in_the_body_frame(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    p, v, w = rng.normal(size=(3, 3))
    msg = roundtrip(ros1.odometry(12.5, "quad1/body", p, q, v, w))
    np.testing.assert_allclose(ros1.xyz(msg.twist.twist.linear), quat_to_matrix(q).T @ v, atol=1e-12)
    t, p2, q2, v2, w2 = ros1.from_odometry(msg)
    assert t == pytest.approx(12.5)
    np.testing.assert_allclose(p2, p)
    np.testing.assert_allclose(q2, q, atol=1e-12)
    np.testing.assert_allclose(v2, v, atol=1e-12)  # back in the world frame
    np.testing.assert_allclose(w2, w)
    assert msg.child_frame_id == "quad1/body" and msg.header.frame_id == "world"


def test_quaternion_order_at_the_edge():
    msg = ros1.quaternion((0.1, 0.2, 0.3, 0.4))  # w, x, y, z inside
    assert (msg.x, msg.y, msg.z, msg.w) == (0.2, 0.3, 0.4, 0.1)
    np.testing.assert_allclose(ros1.wxyz(msg), (0.1, 0.2, 0.3, 0.4))


def test_plan_survives_the_reference_message(rng):
    t = node_times(3.0)
    p, v, a, j, w = rng.normal(size=(5, 21, 3))
    plan = UavTrajectory(t, p, v, a, j, w)
    msg = roundtrip(ros1.reference_message(plan, t_offset=100.0))
    assert len(msg.points) == 21 and msg.header.stamp.to_sec() == pytest.approx(103.0)
    arrays = ros1.trajectory_arrays(msg, t_offset=100.0)
    np.testing.assert_allclose(arrays["t"], t, atol=1e-9)
    for key, value in (("p", p), ("v", v), ("a", a), ("j", j), ("w", w)):
        np.testing.assert_allclose(arrays[key], value)
    assert all(pt.command.is_single_rotor_thrust is False for pt in msg.points)


def test_load_reference_horizon_message_carries_every_field():
    reference = make_reference("eight-medium", orientation="zero-sideslip")
    times = np.linspace(4.0, 6.0, 11)
    sample = reference.sample(times)
    msg = roundtrip(ros1.load_setpoints_message(4.0, times, sample, t_offset=50.0))
    arrays = ros1.load_setpoints_arrays(msg)
    np.testing.assert_allclose(arrays["t"], times + 50.0)
    for key in ("p", "v", "a", "j", "q", "omega", "alpha"):
        np.testing.assert_allclose(arrays[key], getattr(sample, key), atol=1e-12, err_msg=key)


def test_missing_ros_names_the_debian_packages(monkeypatch):
    import builtins
    import sys

    real_import = builtins.__import__

    def no_rospy(name, *args, **kwargs):
        if name == "rospy":
            raise ImportError("No module named 'rospy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "rospy", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_rospy)
    available, reason = ros1.ros_available()
    assert not available
    assert "apt-get install python3-rospy" in reason and "--system-site-packages" in reason
    with pytest.raises(ros1.RosUnavailable, match="rospy could not be imported"):
        ros1.rospy()
