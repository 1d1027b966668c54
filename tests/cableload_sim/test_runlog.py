"""Run logs: Agilicious message sums, bag round trip, crash tolerance, foreign bags."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from flights import write_flight_bag  # noqa: E402
from rosbags.rosbag1 import Reader  # noqa: E402

from cableload_sim.io.runlog import (  # noqa: E402
    LOAD_POSE_TOPIC,
    RunLogWriter,
    make_typestore,
    message_md5,
    metrics_from_bag,
    read_raw_messages,
    read_run,
    scan_bag,
)

REPO = Path(__file__).resolve().parents[2]
METRIC_KEYS = (
    "rmse_position_m",
    "rmse_orientation_deg",
    "min_uav_distance_m",
    "slack_fraction",
    "longest_slack_s",
    "max_thrust_ratio",
    "sim_time_s",
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, paper_config):
    """A 5 s formation flight along the slow eight, logged live."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    path = tmp_path_factory.mktemp("runlog") / "run.bag"
    backend = make_backend("embedded", paper_config)
    result = run_episode(
        backend,
        make_planner("formation", paper_config),
        make_reference("eight-slow"),
        5.0,
        record_plans=True,
        keep_samples=True,
        logger=RunLogWriter(path, paper_config),
    )
    return path, result, backend.system


def test_agilicious_message_md5_sums():
    assert message_md5("agiros_msgs/Reference") == "e374aa4139d56741a12f70c4fa22044e"
    assert message_md5("agiros_msgs/Setpoint") == "7664ff7a9a9bd8a5486517df47844f44"
    assert message_md5("agiros_msgs/QuadState") == "64abc96085c98da0b390e079b723be37"
    assert message_md5("agiros_msgs/Command") == "4d577bccd8c13adfb614a4c929e12409"
    # Standard types come from rosbags' Noetic store: the well-known Odometry sum.
    assert message_md5("nav_msgs/Odometry") == "cd5e73d190d741a2f92e81eda573aca7"


def test_round_trip_gives_the_live_samples_and_metrics(recorded, paper_config):
    path, result, system = recorded
    assert path.exists() and not path.with_name(path.name + ".active").exists()
    run = read_run(path)
    assert run.indexed and run.status == "completed"
    assert run.quad_names == ["quad1", "quad2", "quad3"]
    for field in result.samples.FIELDS:
        np.testing.assert_allclose(
            getattr(run.samples, field), getattr(result.samples, field), rtol=0, atol=1e-12, err_msg=field
        )
    np.testing.assert_array_equal(run.ref_p, result.ref_p)
    np.testing.assert_array_equal(run.ref_q, result.ref_q)
    assert run.system == system
    assert run.config == json.loads(json.dumps(paper_config.to_dict()))
    assert run.info["planner"] == "formation" and run.info["reference"]["name"] == "eight-slow"

    from_bag = metrics_from_bag(path)
    for key in METRIC_KEYS:
        assert from_bag[key] == pytest.approx(result.metrics[key], rel=1e-9, abs=1e-12), key
        assert run.metrics[key] == pytest.approx(result.metrics[key], rel=1e-12), key

    assert len(run.plans) == len(result.plans) == 50
    for logged, live in zip(run.plans, result.plans, strict=True):
        assert logged.t == pytest.approx(live.t, abs=1e-9)
        for got, want in zip(logged.trajectories, live.trajectories, strict=True):
            for field in ("t", "p", "v", "a", "j", "body_rates"):
                np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    assert run.plan_at(0.25).t == pytest.approx(0.2)


def test_bag_has_the_flight_topics_with_stamps_equal_to_sim_time(recorded):
    path, result, _ = recorded
    store = make_typestore()
    with Reader(path) as reader:
        topics = {topic: (info.msgtype, info.msgcount) for topic, info in reader.topics.items()}
        stamps = []
        for connection, time_ns, raw in reader.messages(
            [c for c in reader.connections if c.topic == "/quad2/agiros_pilot/state"]
        ):
            msg = store.deserialize_ros1(raw, connection.msgtype)
            stamps.append(time_ns)
            assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == time_ns
            assert msg.t == pytest.approx(time_ns / 1e9, abs=1e-9)
    for i in (1, 2, 3):
        assert topics[f"/quad{i}/agiros_pilot/state"] == ("agiros_msgs/msg/QuadState", 500)
        assert topics[f"/quad{i}/agiros_pilot/odometry"] == ("nav_msgs/msg/Odometry", 500)
        assert topics[f"/quad{i}/agiros_pilot/trajectory"] == ("agiros_msgs/msg/Reference", 50)
    assert topics[LOAD_POSE_TOPIC] == ("geometry_msgs/msg/PoseStamped", 500)
    assert topics["/cableload/cable_tension"][1] == 500
    assert topics["/cableload/metrics"] == ("std_msgs/msg/String", 1)
    np.testing.assert_allclose(np.array(stamps) / 1e9, result.samples.t, atol=1e-9)


def test_odometry_twist_is_in_the_body_frame(recorded):
    """nav_msgs/Odometry defines its twist in the child frame: v_body = R^T v_world."""
    from cableload_sim.rotations import quat_to_matrix

    path, result, _ = recorded
    store = make_typestore()
    with Reader(path) as reader:
        conns = [c for c in reader.connections if c.topic == "/quad1/agiros_pilot/odometry"]
        connection, _, raw = next(iter(reader.messages(conns)))
    msg = store.deserialize_ros1(raw, connection.msgtype)
    lin = msg.twist.twist.linear
    R = quat_to_matrix(result.samples.uav_q[0, 0])
    np.testing.assert_allclose([lin.x, lin.y, lin.z], R.T @ result.samples.uav_v[0, 0], atol=1e-12)
    assert msg.child_frame_id == "quad1/body" and msg.header.frame_id == "world"


def test_scanning_the_chunks_finds_what_the_index_finds(recorded):
    path, _, _ = recorded
    indexed, had_index = read_raw_messages(path)
    scanned = scan_bag(path)
    assert had_index
    key = lambda m: (m.time_ns, m.connection.topic, m.data)  # noqa: E731
    assert sorted(map(key, scanned)) == sorted(map(key, indexed))
    assert {m.connection for m in scanned} == {m.connection for m in indexed}


def test_a_bag_whose_index_was_never_written_is_recovered(recorded, tmp_path):
    """Cut the bag at the end of its third flushed chunk and zero the index position."""
    path, result, _ = recorded
    data = bytearray(path.read_bytes())
    cut = _chunk_end(data, 3)
    at = data.index(b"index_pos=") + len(b"index_pos=")
    data[at : at + 8] = bytes(8)  # as the writer leaves it until it closes the bag
    broken = tmp_path / "cut.bag"
    broken.write_bytes(data[:cut] + b"\x00" * 17)  # a few bytes of a next record, cut short
    with pytest.raises(Exception, match="not indexed"):
        Reader(broken).open()
    run = read_run(broken)
    assert not run.indexed and run.metrics is None
    k = len(run.samples)
    assert run.samples.t[-1] == pytest.approx(2.0)  # the chunk flushed after 2 s
    np.testing.assert_array_equal(run.samples.uav_p, result.samples.uav_p[:k])


def _chunk_end(data: bytearray, count: int) -> int:
    """Offset after the ``count``-th chunk record and its index records."""
    import struct

    pos, chunks = 13, 0
    while True:
        header_len = struct.unpack_from("<L", data, pos)[0]
        header = bytes(data[pos + 4 : pos + 4 + header_len])
        data_len = struct.unpack_from("<L", data, pos + 4 + header_len)[0]
        nxt = pos + 8 + header_len + data_len
        if chunks == count and b"op=\x04" not in header:
            return pos
        chunks += b"op=\x05" in header
        pos = nxt


KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.params import load_config
    from cableload_sim.io.runlog import RunLogWriter
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    class Paced(RunLogWriter):
        def samples(self, samples, ref_p, ref_q):
            super().samples(samples, ref_p, ref_q)
            print(f"{samples.t[-1]:.4f} {self.flushed_time:.4f}", flush=True)
            time.sleep(0.03)

    cfg = load_config()
    run_episode(make_backend("embedded", cfg), make_planner("formation", cfg),
                make_reference("eight-slow"), 60.0, logger=Paced(sys.argv[1], cfg))
""")


def test_a_killed_writer_leaves_a_readable_bag(tmp_path):
    path = tmp_path / "killed.bag"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    written, flushed = 0.0, -math.inf
    deadline = time.monotonic() + 90.0
    try:
        for line in proc.stdout:
            written, flushed = map(float, line.split())
            if flushed >= 3.0 or time.monotonic() > deadline:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        rest, err = proc.communicate()
    assert flushed >= 3.0, f"writer never flushed 3 s: {err[-2000:]}"
    for line in rest.splitlines():  # what it printed before the signal landed
        t_line, flushed_line = map(float, line.split())
        written, flushed = max(written, t_line), max(flushed, flushed_line)
    assert proc.returncode == -signal.SIGKILL
    assert not path.exists() and path.with_name("killed.bag.active").exists()

    run = read_run(path)  # finds killed.bag.active
    t = run.samples.t
    assert not run.indexed and run.metrics is None
    assert np.all(np.diff(t) > 0) and t[0] == pytest.approx(0.01)
    np.testing.assert_allclose(np.diff(t), 0.01, atol=1e-9)
    # Everything flushed is there; at most the last second (unflushed) is lost, and nothing
    # beyond the period being written when the signal landed appears.
    assert flushed - 1e-9 <= t[-1] <= written + 0.1 + 1e-9
    assert written - t[-1] <= 1.0 + 1e-9
    assert run.plans and run.plans[-1].t <= t[-1]
    metrics = metrics_from_bag(path)
    assert metrics["sim_time_s"] == pytest.approx(t[-1])
    assert 0.0 < metrics["rmse_position_m"] < 0.2 and metrics["min_uav_distance_m"] > 0.4


def test_flushed_time_never_lags_more_than_a_second(tmp_path, paper_config):
    """After every period, everything up to ``flushed_time`` is in the file on disk."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    seen = []

    class Checked(RunLogWriter):
        def samples(self, samples, ref_p, ref_q):
            super().samples(samples, ref_p, ref_q)
            on_disk = [
                m.time_ns / 1e9 for m in scan_bag(self.active_path) if m.connection.topic == LOAD_POSE_TOPIC
            ]
            seen.append((samples.t[-1], self.flushed_time, max(on_disk, default=0.0)))

    path = tmp_path / "flush.bag"
    run_episode(
        make_backend("embedded", paper_config),
        make_planner("formation", paper_config),
        make_reference("eight-slow"),
        2.5,
        logger=Checked(path, paper_config, fsync=False),
    )
    for t, flushed, on_disk in seen:
        assert on_disk >= flushed - 1e-9 or flushed == -math.inf
        assert t - on_disk <= 1.0 + 1e-9
    assert [round(f, 6) for _, f, _ in seen if f > 0] == [1.0] * 10 + [2.0] * 6


def test_a_flight_bag_without_our_topics(tmp_path):
    """Mocap at 100 Hz, quadrotor states at 50 Hz with an offset, lz4 chunks, no config."""
    path = tmp_path / "flight.bag"
    start = write_flight_bag(path)
    run = read_run(path)
    assert run.quad_names == ["alpha1", "alpha2"]
    assert run.metrics is None and run.system is None and run.ref_p is None and run.plans == []
    # Wall-clock stamps: times count from the first sample, the mocap's at 10 ms.
    assert run.time_origin_ns == start + 10**7 and run.samples.t[0] == 0.0
    t = run.samples.t + 0.01
    assert len(t) == 298 and t[-1] == pytest.approx(2.98)
    # Linear motion: interpolating the 50 Hz states onto the mocap times is exact.
    np.testing.assert_allclose(run.samples.uav_p[:, 0, 0], t, atol=1e-6)
    np.testing.assert_allclose(run.samples.uav_p[:, 1, 1], 2.0)
    np.testing.assert_allclose(run.samples.load_v[:, 0], 0.5, atol=1e-6)  # finite differences
    assert np.isnan(run.samples.cable_tension).all() and np.isnan(run.samples.rotor_speeds).all()
    with pytest.raises(
        ValueError,
        match=r"records no system .*pass the flight's configuration: "
        r"--config FILE",
    ):
        metrics_from_bag(path)

    # The same bag without its index: the lz4 chunks are scanned instead.
    data = bytearray(path.read_bytes())
    at = data.index(b"index_pos=") + len(b"index_pos=")
    data[at : at + 8] = bytes(8)
    unindexed = tmp_path / "unindexed.bag"
    unindexed.write_bytes(bytes(data))
    scanned = read_run(unindexed)
    assert not scanned.indexed and run.indexed
    for field in run.samples.FIELDS:
        np.testing.assert_array_equal(getattr(scanned.samples, field), getattr(run.samples, field))


def test_a_flight_bag_that_lost_the_load_is_refused_naming_its_topics(tmp_path):
    """The quadrotors' states recorded, the load's motion capture not: no sample can say
    where the load was; the error names the file and the topics expected."""
    from cableload_sim.errors import FileContentError

    path = tmp_path / "no-load.bag"
    write_flight_bag(path, load=False)
    with pytest.raises(FileContentError, match=r"no-load.bag'?: the quadrotors are recorded but not"):
        read_run(path)


def test_writer_guards(tmp_path, paper_config):
    path = tmp_path / "guard.bag"
    path.write_bytes(b"x")
    with pytest.raises(FileExistsError, match="guard.bag"):
        RunLogWriter(path, paper_config)
    writer = RunLogWriter(path, paper_config, overwrite=True)
    assert not path.exists()
    with pytest.raises(RuntimeError, match="start"):
        writer.plans(0.0, [])
    with pytest.raises(ValueError, match="3 distinct names"):
        RunLogWriter(tmp_path / "names.bag", quad_names=["a", "a", "b"]).start(paper_config.system)


def _first_index_record(data: bytes) -> int:
    """Offset of the data of the first per-chunk index record (op 4: time, offset pairs)."""
    import struct

    pos = 13
    while True:
        header_len = struct.unpack_from("<L", data, pos)[0]
        header = bytes(data[pos + 4 : pos + 4 + header_len])
        data_len = struct.unpack_from("<L", data, pos + 4 + header_len)[0]
        if b"op=\x04" in header and data_len >= 24:
            return pos + 8 + header_len
        pos += 8 + header_len + data_len


def test_a_damaged_index_is_read_by_scanning(recorded, tmp_path):
    """Index entries that point at the wrong message (rosbags asserts on them) are not
    trusted: the chunks are scanned and everything is recovered."""
    path, result, _ = recorded
    data = bytearray(path.read_bytes())
    at = _first_index_record(data)
    data[at + 12 : at + 20] = data[at : at + 8]  # the second entry's time made the first's
    damaged = tmp_path / "damaged.bag"
    damaged.write_bytes(bytes(data))
    with pytest.raises(AssertionError):  # what rosbags' reader does with it
        with Reader(damaged) as reader:
            for _ in reader.messages():
                pass
    run = read_run(damaged)
    assert not run.indexed and run.status == "completed"
    np.testing.assert_array_equal(run.samples.load_p, result.samples.load_p)
    assert metrics_from_bag(damaged) == metrics_from_bag(path)


@pytest.mark.parametrize("content", [b"", b"\x99" * 4096, b"#ROSBAG V2.0\n" + b"\xff" * 500])
def test_a_file_that_is_no_bag_is_refused_with_its_name(tmp_path, content):
    from cableload_sim.errors import FileContentError

    noise = tmp_path / "noise.bag"
    noise.write_bytes(content)
    try:
        run = read_run(noise)
    except FileContentError as err:
        assert "noise.bag" in str(err) and "not a ROS1 bag" in str(err)
    else:  # a bag's magic line followed by garbage: a bag without any message
        assert len(run.samples) == 0 and run.plans == []
        with pytest.raises(FileContentError, match=r"noise\.bag' holds no samples"):
            metrics_from_bag(noise)


def test_a_device_or_folder_is_refused_without_reading_it(tmp_path):
    from cableload_sim.errors import FileContentError

    with pytest.raises(FileContentError, match="'/dev/zero' is not a regular file"):
        read_run("/dev/zero")
    with pytest.raises(FileContentError, match="is a folder"):
        read_run(tmp_path)


def test_a_full_disk_stops_the_writer_and_keeps_what_was_flushed(tmp_path, paper_config, monkeypatch):
    import errno

    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.io.runlog import writer as writer_module
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    real_fsync = writer_module.os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 3:  # the config, then the first two simulated seconds
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(writer_module.os, "fsync", fsync)
    path = tmp_path / "full.bag"
    with pytest.raises(OSError) as caught:
        with RunLogWriter(path, paper_config) as log:
            run_episode(
                make_backend("embedded", paper_config),
                make_planner("formation", paper_config),
                make_reference("eight-slow"),
                10.0,
                logger=log,
            )
    err = caught.value
    assert err.errno == errno.ENOSPC and err.filename == str(path) + ".active"
    assert "No space left on device (the log up to 2 s of simulated time is kept" in err.strerror
    monkeypatch.undo()
    run = read_run(path)  # the .active file of the stopped writer
    assert run.path.name == "full.bag.active" and run.metrics is None
    assert 2.0 <= run.samples.t[-1] <= 3.0  # synced up to 2 s; the third written, not synced


@pytest.mark.slow
def test_the_writer_memory_does_not_grow_with_the_log(tmp_path, paper_config):
    """rosbags keeps an index entry per message until the bag is closed; the writer keeps
    only their counts, so an hour-long log takes no more memory than a minute-long one."""
    import tracemalloc

    from cableload_sim.physics.world import WorldSamples

    system = paper_config.system
    k, n = 10, system.n_uavs

    def period(t0):
        unit = np.tile([1.0, 0.0, 0.0, 0.0], (k, 1))
        samples = WorldSamples(
            t=t0 + 0.01 * np.arange(1, k + 1),
            load_p=np.zeros((k, 3)),
            load_q=unit,
            load_v=np.zeros((k, 3)),
            load_omega=np.zeros((k, 3)),
            uav_p=np.ones((k, n, 3)),
            uav_q=np.tile([1.0, 0.0, 0.0, 0.0], (k, n, 1)),
            uav_v=np.zeros((k, n, 3)),
            uav_omega=np.zeros((k, n, 3)),
            rotor_speeds=np.full((k, n, 4), 1000.0),
            cable_tension=np.full((k, n), 5.0),
        )
        return samples, np.zeros((k, 3)), unit

    writer = RunLogWriter(tmp_path / "long.bag", paper_config, fsync=False)
    writer.start(system)
    sizes = []
    tracemalloc.start()
    try:
        for second in range(40):
            for tenth in range(10):
                writer.samples(*period(second + 0.1 * tenth))
            if second in (9, 39):
                sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    writer.finish("completed", {})
    # 30 s more of samples: 33 000 messages (about 3 MB of index entries if they were kept)
    assert sizes[1] - sizes[0] < 300_000, sizes
    assert len(read_run(tmp_path / "long.bag").samples) == 4000


@pytest.mark.parametrize("compression", ["none", "bz2"])
def test_every_compression_holds_the_same_messages(recorded, tmp_path, paper_config, compression):
    """The same flight logged with LZ4 (the default), bz2 or no compression: the same messages,
    byte for byte; LZ4 takes well under half the room of none."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.io.runlog.topics import METRICS_TOPIC as METRICS
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    lz4_path = recorded[0]
    path = tmp_path / f"{compression}.bag"
    run_episode(
        make_backend("embedded", paper_config),
        make_planner("formation", paper_config),
        make_reference("eight-slow"),
        5.0,
        record_plans=True,
        logger=RunLogWriter(path, paper_config, compression=compression),
    )

    def messages(bag):  # the metrics' wall time differs from run to run
        raw, _ = read_raw_messages(bag)
        return sorted((m.time_ns, m.connection.topic, m.data) for m in raw if m.connection.topic != METRICS)

    assert messages(path) == messages(lz4_path)
    if compression == "none":
        assert lz4_path.stat().st_size < 0.5 * path.stat().st_size
    with pytest.raises(ValueError, match="compression: expected one of"):
        RunLogWriter(tmp_path / "x.bag", paper_config, compression="zip")
