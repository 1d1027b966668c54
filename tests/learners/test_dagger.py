"""DAgger: schedule, mixing, crash safety (kill and resume), executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from learners.config import ConfigError, load_train_config, train_config_from_dict
from learners.dagger import EpisodeTask, betas, collect_episode, train
from learners.store import RunStore

TINY = {
    "network": {
        "history": 4,
        "channels": 8,
        "stream_features": 8,
        "latent": 16,
        "decoder_hidden": 16,
        "decoder_layers": 2,
    },
    "dagger": {
        "rounds": 3,
        "epochs": 2,
        "episodes_per_round": 1,
        "episode_s": 2.0,
        "disturbance_rounds": 1,
        "eval_s": 0.0,
        "seed": 5,
    },
    "training": {"batch_size": 64, "workers": 1},
}


def write_tiny(tmp_path: Path) -> Path:
    lines = []
    for table, values in TINY.items():
        lines.append(f"[{table}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
    path = tmp_path / "tiny.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_beta_rises_linearly_from_teacher_to_student():
    b = betas(20)
    assert b[0] == 0.0 and b[-1] == 1.0
    np.testing.assert_allclose(np.diff(b), 1.0 / 19.0)


def test_train_config_errors_are_clear(tmp_path):
    with pytest.raises(ConfigError, match=r"dagger.rounds: expected at least 1, got 0"):
        train_config_from_dict({"dagger": {"rounds": 0}})
    with pytest.raises(ConfigError, match=r"unknown key 'epoch'"):
        train_config_from_dict({"dagger": {"epoch": 3}})
    with pytest.raises(ConfigError, match=r"network.channels: expected an integer, got 'wide'"):
        train_config_from_dict({"network": {"channels": "wide"}})
    with pytest.raises(ConfigError, match="does not exist"):
        load_train_config(tmp_path / "none.toml")


def test_a_training_config_names_its_system_by_file_or_by_shipped_name(tmp_path):
    """``system_config``: a file beside the training config, or a shipped configuration by
    name (``paper``, ``paper-conditions``); a file of that name beside it comes first."""
    from learners.dagger import training_system

    config = tmp_path / "train.toml"
    config.write_text('system_config = "paper-conditions"\n')
    loaded = load_train_config(config)
    assert loaded.system_config == "paper-conditions"
    assert training_system(loaded, None).sensing.enabled
    (tmp_path / "mine.toml").write_text('extends = "paper"\n[load]\nmass = 1.1\n')
    config.write_text('system_config = "mine.toml"\n')
    assert training_system(load_train_config(config), None).system.load.mass == pytest.approx(1.1)
    (tmp_path / "paper-conditions.toml").write_text('extends = "paper"\n[load]\nmass = 1.2\n')
    config.write_text('system_config = "paper-conditions.toml"\n')
    assert training_system(load_train_config(config), None).system.load.mass == pytest.approx(1.2)


def test_training_trajectories_name_their_own_orientation_and_options():
    from learners.dagger import _episode_plan, validation_references

    config = train_config_from_dict(
        {
            "dagger": {
                "orientation": "constant",
                "episodes_per_round": 1,
                "trajectories": [
                    {"name": "eight", "ax": 2.7, "ay": 2.3},
                    {"name": "circle", "orientation": "zero-sideslip", "radius": 2.0},
                    "square",
                ],
            }
        }
    )
    rng = np.random.default_rng(0)
    plans = [_episode_plan(config, r, 0, rng, None) for r in range(3)]
    assert [(p.name, p.orientation, dict(p.options)) for p in plans] == [
        ("eight", "constant", {"ax": 2.7, "ay": 2.3}),
        ("circle", "zero-sideslip", {"radius": 2.0}),
        ("square", "constant", {}),
    ]
    assert plans[0].build().sample(np.array([0.0])).p.shape == (1, 3)
    (spec, _), *_ = validation_references(config)
    assert (spec.name, dict(spec.options)) == ("eight", {"ax": 2.7, "ay": 2.3})
    for bad, message in (
        ({"ax": 2.0}, "a table with a 'name' key"),
        ({"name": "eight", "orientation": "sideways"}, r"orientation: expected one of"),
        ({"name": "eight", "ax": "wide"}, r"\.ax: expected a finite number"),
        ({"name": "eight", "bogus": 1.0}, "unknown option 'bogus'"),
        (3, "expected a reference name or a table"),
    ):
        with pytest.raises(ConfigError, match=message):
            train_config_from_dict({"dagger": {"trajectories": [bad]}})


def run_cli_train(config: Path, out: Path, resume=False):
    cmd = [
        sys.executable,
        "-m",
        "cableload_sim.cli",
        "train",
        "--config",
        str(config),
        "--out",
        str(out),
        "--json",
    ] + (["--resume"] if resume else [])
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.slow
def test_killed_run_resumes_with_nothing_lost_or_duplicated(tmp_path):
    """A run killed after its first round resumes from the checkpoint and ends with exactly
    the same data, checkpoints and summary as a run never interrupted (same seeds)."""
    config = write_tiny(tmp_path)
    whole = tmp_path / "whole"
    proc = run_cli_train(config, whole)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    interrupted = tmp_path / "interrupted"
    proc = run_cli_train(config, interrupted)
    store = RunStore(interrupted)
    deadline = time.time() + 300
    while time.time() < deadline and not store.completed_rounds():
        time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = store.completed_rounds()
    assert 1 <= len(done) < 3, done  # killed midway
    with pytest.raises(FileExistsError):
        train(load_train_config(config), interrupted, progress=False)
    proc = run_cli_train(config, interrupted, resume=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    a, b = RunStore(whole), RunStore(interrupted)
    assert a.completed_rounds() == b.completed_rounds() == [0, 1, 2]
    for k in range(3):
        x, y = a.read_shard(k), b.read_shard(k)
        for name in x:
            np.testing.assert_array_equal(x[name], y[name])
    rounds = [row["round"] for row in b.read_summary()]
    assert rounds == [0, 1, 2]
    loss_a = [row["loss"] for row in a.read_summary()]
    loss_b = [row["loss"] for row in b.read_summary()]
    np.testing.assert_allclose(loss_a, loss_b, rtol=1e-6)
    assert (interrupted / "policy" / "student.onnx").is_file()
    assert (interrupted / "training_summary.png").stat().st_size > 10_000
    # a resumed run refuses another configuration
    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace("epochs = 2", "epochs = 3"))
    with pytest.raises(ValueError, match="another configuration"):
        train(load_train_config(other), interrupted, resume=True, progress=False)


def tiny_task(beta=0.0, policy=None, seed=1):
    config = train_config_from_dict(TINY)
    resolved = config.to_dict()
    return EpisodeTask(
        config=resolved,
        system_config="paper",
        round_index=0,
        episode=0,
        beta=beta,
        trajectory="eight-medium",
        orientation="constant",
        disturbance=None,
        policy=policy,
        seed=seed,
    )


def test_collected_samples_label_every_quadrotor_every_decision():
    result = collect_episode(tiny_task())
    arrays = result["arrays"]
    assert result["status"] == "completed" and result["student_decisions"] == 0
    n = len(arrays["t"])
    assert n == 3 * 20  # 2 s at 10 Hz, three quadrotors
    assert arrays["target"].shape == (n, 21, 12)
    assert arrays["ego"].shape == (n, 4, 18) and arrays["ref"].shape == (n, 21, 18)
    # targets start at the quadrotor's own position (the teacher's plans are continuous)
    assert np.abs(arrays["target"][:, 0, 0:3]).max() < 0.05
    again = collect_episode(tiny_task())
    np.testing.assert_array_equal(again["arrays"]["target"], arrays["target"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ray_and_the_process_pool_collect_the_same_data_for_the_same_seed(tmp_path):
    """Two rounds of two episodes each (the second round half student), on the local process
    pool and on a local Ray instance of two workers (``RayExecutor``): every shard and the
    trained weights are the same bit for bit."""
    pytest.importorskip("ray")
    import torch

    config = train_config_from_dict(
        {
            **TINY,
            "dagger": {**TINY["dagger"], "rounds": 2, "episodes_per_round": 2, "disturbance_rounds": 0},
            "training": {"batch_size": 64, "workers": 2, "torch_threads": 1},
        }
    )
    runs = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        train(config, out, executor=executor, progress=False)
        runs[executor] = out
        if executor == "ray":
            import ray

            ray.shutdown()
    stores = {k: RunStore(v) for k, v in runs.items()}
    for k in range(2):
        local, ray_ = stores["local"].read_shard(k), stores["ray"].read_shard(k)
        assert sorted(local) == sorted(ray_)
        for name in local:
            np.testing.assert_array_equal(
                np.asarray(local[name]), np.asarray(ray_[name]), err_msg=f"round {k} {name}"
            )
    weights = {k: torch.load(v / "policy" / "student.pt", weights_only=True) for k, v in runs.items()}
    state = {k: w["state_dict"] if "state_dict" in w else w for k, w in weights.items()}
    for name, tensor in state["local"].items():
        assert torch.equal(tensor, state["ray"][name]), name


def test_best_round_is_the_completed_one_with_the_smallest_error():
    from learners.dagger import select_round

    rows = [
        {
            "round": 0,
            "eval_status": "diverged",
            "eval_rmse_position_m": 0.001,
            "eval_rmse_orientation_deg": 0.1,
        },
        {
            "round": 1,
            "eval_status": "completed",
            "eval_rmse_position_m": 0.02,
            "eval_rmse_orientation_deg": 1.5,
        },
        {
            "round": 2,
            "eval_status": "completed",
            "eval_rmse_position_m": 0.03,
            "eval_rmse_orientation_deg": 1.0,
        },
        {
            "round": 3,
            "eval_status": "completed",
            "eval_rmse_position_m": float("nan"),
            "eval_rmse_orientation_deg": 1.0,
        },
    ]
    assert select_round(rows, "best") == 1  # 2 + 1.5 < 3 + 1
    assert select_round(rows, "last") == 3


def test_shards_are_streamed_from_disk_and_gathered_in_any_order(tmp_path):
    from learners.store import SAMPLE_ARRAYS, Samples

    store = RunStore(tmp_path)
    rng = np.random.default_rng(0)
    rounds = []
    for k, n in enumerate((5, 0, 7)):
        arrays = {name: rng.normal(size=(n, 2, 3)).astype(np.float32) for name in SAMPLE_ARRAYS}
        arrays["t"] = np.arange(n, dtype=float) + 100 * k
        store.write_shard(k, arrays)
        rounds.append(arrays)
    with pytest.raises(FileExistsError):
        store.write_shard(0, rounds[0])  # a shard is written once, never replaced
    samples = store.open_shards(2)
    assert isinstance(samples, Samples) and len(samples) == 12
    assert isinstance(samples.shards[2]["ego"], np.memmap)
    whole = store.read_shards(2)
    order = rng.permutation(12)
    batch = samples.gather(order)
    for name in ("ego", "load", "ref", "prior", "target"):
        np.testing.assert_array_equal(batch[name], whole[name][order])
    np.testing.assert_array_equal(samples["t"], whole["t"])
    assert not list((tmp_path / "data").glob(".tmp-*"))


def test_with_sensors_the_teacher_labels_from_the_true_state():
    """A privileged teacher: with [sensing] on, the student's samples are encoded from what the
    sensors give, the teacher's labels from the truth (dagger.teacher_sees_truth, default)."""
    from learners.dagger import DaggerPlanner

    seen = {}

    class Recorder:
        def __init__(self, name, result):
            self.name, self.result = name, result

        def plan(self, state, reference):
            seen[self.name] = state
            return self.result

        def observe(self, state, reference):
            seen[self.name] = state
            return []

        def reset(self):
            pass

    observed, truth = object(), object()
    planner = DaggerPlanner(
        Recorder("teacher", []), Recorder("student", None), 0.0, np.random.default_rng(0), truth=lambda: truth
    )

    class Reference:
        def sample(self, t):
            class Sample:
                p = np.zeros((1, 3))

            return Sample()

    class State:
        t = 0.0
        load_p = np.zeros(3)

    state = State()
    planner.plan(state, Reference())
    assert seen["student"] is state and seen["teacher"] is truth
    planner = DaggerPlanner(Recorder("teacher", []), Recorder("student", None), 0.0, np.random.default_rng(0))
    planner.plan(state, Reference())
    assert seen["teacher"] is state
    del observed


def test_collected_episode_with_sensors_labels_from_the_truth():
    """The same episode with the teacher seeing the truth or the sensors: the first decision's
    observations are the same (the same sensor noise), its labels are not."""
    results = {}
    for sees in (True, False):
        task = tiny_task(seed=3)
        task.config["dagger"]["teacher_sees_truth"] = sees
        task = EpisodeTask(**{**task.__dict__, "overrides": ("sensing.enabled=true",)})
        results[sees] = collect_episode(task)
        assert results[sees]["status"] == "completed"
    first = {k: {name: a[:3] for name, a in r["arrays"].items()} for k, r in results.items()}
    np.testing.assert_array_equal(first[True]["ego"], first[False]["ego"])
    assert np.abs(first[True]["target"] - first[False]["target"]).max() > 1e-4


def test_teacher_settings_in_the_system_overrides_label_the_data():
    """``dagger.system_overrides`` of ``teacher.*`` reach the teacher that labels: the same
    episode is labelled differently with them."""
    from learners.dagger import _teacher

    overrides = ("teacher.prior=tilt", "teacher.weight_direction=5")
    teacher = _teacher("paper", 3, overrides)
    assert teacher.params.prior == "tilt" and teacher.params.weight_direction == 5.0
    targets = {}
    for extra in ((), overrides):
        task = tiny_task(seed=3)
        task = EpisodeTask(**{**task.__dict__, "overrides": extra})
        result = collect_episode(task)
        assert result["status"] == "completed"
        targets[extra] = result["arrays"]["target"]
    default, generalists = targets.values()
    assert default.shape == generalists.shape
    assert np.abs(default - generalists).max() > 1e-3


def test_a_run_with_a_weight_average_resumes_to_the_same_policy(tmp_path):
    """``training.ema``: the checkpoints hold the average (what flies, is evaluated and
    exported) beside the raw weights; a run stopped after a round and resumed ends with the
    same data and weights as one never stopped. ``dagger.beta_max`` caps the student's share;
    ``dagger.perturb_share`` perturbs episodes from the second round on."""
    import torch

    from learners.export import load_checkpoint

    data = {
        **TINY,
        "dagger": {
            **TINY["dagger"],
            "beta_max": 0.5,
            "perturb_share": 1.0,
            "perturb_load_mass": 1.2,
            "disturbance_rounds": 0,
        },
        "training": {**TINY["training"], "ema": 0.9},
    }
    config = train_config_from_dict(data)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    train(config, whole, progress=False)
    train(config, parts, progress=False, stop_after=1)
    assert RunStore(parts).completed_rounds() == [0]
    train(config, parts, progress=False, resume=True)
    summary = RunStore(whole).read_summary()
    assert [row["beta"] for row in summary] == [0.0, 0.25, 0.5]
    assert [row["episodes"][0]["perturbed"] for row in summary] == [False, True, True]
    for k in range(3):
        x, y = RunStore(whole).read_shard(k), RunStore(parts).read_shard(k)
        for name in x:
            np.testing.assert_array_equal(x[name], y[name])
        a, data_a = load_checkpoint(RunStore(whole).checkpoint_path(k))
        b, data_b = load_checkpoint(RunStore(parts).checkpoint_path(k))
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=name)
        raw = data_a["training_state_dict"]
        assert any(
            not torch.equal(raw[name], p)
            for name, p in a.state_dict().items()
            if name in raw and p.is_floating_point()
        ), "the average is the raw weights"
    exported, _ = load_checkpoint(whole / "policy" / "student.pt")
    last, _ = load_checkpoint(RunStore(whole).checkpoint_path(2))
    for p, q in zip(exported.state_dict().values(), last.state_dict().values()):
        torch.testing.assert_close(p, q)


def test_beta_max_caps_the_students_share():
    np.testing.assert_allclose(betas(5, 0.4), [0.0, 0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ConfigError, match=r"dagger.beta_max: expected between 0 and 1, got 1.5"):
        train_config_from_dict({"dagger": {"beta_max": 1.5}})
    with pytest.raises(ConfigError, match=r"training.ema: expected in \[0, 1\)"):
        train_config_from_dict({"training": {"ema": 1.0}})


def test_node_weights_favour_the_first_nodes_and_average_one():
    import torch

    from learners.dagger import node_weights

    assert node_weights(torch.arange(21), 0.0) is None
    weights = node_weights(torch.tensor([0, 5, 20]), 0.3)
    assert torch.isclose(weights.mean(), torch.tensor(1.0))
    assert weights[0] > weights[1] > weights[2] > 0.0


def test_the_output_floors_scale_down_to_what_the_labels_vary():
    """``training.output_floor_scale``: the loss's scale of each output is its labels' spread,
    no smaller than the floor times the scale; a residual of 6 mm is scaled by the 50 mm floor
    at 1, by its own spread at 0.1."""
    from learners.dagger import OUTPUT_STD_FLOOR, data_stats

    rng = np.random.default_rng(3)
    k = 400
    target = np.zeros((k, 2, 12), dtype=np.float32)
    target[..., 0:3] = rng.normal(0.0, 0.006, (k, 2, 3))  # positions, m
    target[..., 6:9] = rng.normal(0.0, 0.06, (k, 2, 3))  # velocities, m/s
    data = {
        "ego": rng.normal(size=(k, 4, 18)),
        "load": rng.normal(size=(k, 4, 12)),
        "ref": rng.normal(size=(k, 2, 18)),
        "prior": np.zeros((k, 2, 15), dtype=np.float32),
        "target": target,
    }
    floored = data_stats(data)["out_std"]
    np.testing.assert_allclose(floored, OUTPUT_STD_FLOOR)
    spread = data_stats(data, floor_scale=0.1)["out_std"]
    np.testing.assert_allclose(spread[0:3], 0.006, rtol=0.1)
    np.testing.assert_allclose(spread[6:9], 0.06, rtol=0.1)
    np.testing.assert_allclose(spread[3:6], 0.05)  # no spread: the scaled floor
    with pytest.raises(ConfigError, match=r"training.output_floor_scale: expected in \(0, 1\], got 0.0"):
        train_config_from_dict({"training": {"output_floor_scale": 0.0}})
