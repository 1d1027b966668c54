"""A policy file or a training run never runs code: checkpoints are read as weights only.

Each malicious file carries an object whose unpickling would create a marker file; every path
that reads a checkpoint (``--policy DIR`` with either runtime, ``train --resume``, the bytes a
DAgger worker receives) must refuse it with a one-line message and leave no marker.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from learners.config import train_config_from_dict
from learners.dagger import EpisodeTask, _system_config, collect_episode
from learners.export import (
    SHIPPED_POLICY,
    CorruptCheckpoint,
    UnsafeCheckpoint,
    checkpoint_bytes,
    load_checkpoint,
    load_policy,
    read_checkpoint,
)
from learners.network import NetworkConfig, StudentNet
from learners.store import RunStore

TINY_NET = {
    "history": 4,
    "channels": 8,
    "stream_features": 8,
    "latent": 16,
    "decoder_hidden": 16,
    "decoder_layers": 2,
}


class _Payload:
    """Unpickling this calls ``pathlib.Path.touch`` on the marker: code run from a file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def malicious_checkpoint(marker: Path) -> bytes:
    """A well-formed checkpoint of the shipped policy plus one object that runs code."""
    data = torch.load(SHIPPED_POLICY / "student.pt", map_location="cpu", weights_only=True)
    data["info"] = {"note": _Payload(marker)}
    path = marker.with_name("evil.pt")
    torch.save(data, path)
    return path.read_bytes()


def test_the_payload_really_runs_code_when_unpickled(tmp_path):
    """The fixture is a real attack: an unsafe load executes it."""
    marker = tmp_path / "pwned"
    blob = malicious_checkpoint(marker)
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()
    marker.unlink()
    assert len(blob) > 1000


def test_malicious_checkpoint_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    blob = malicious_checkpoint(marker)
    with pytest.raises(UnsafeCheckpoint, match=r"evil\.pt: refused.*nothing in it was run"):
        load_checkpoint(tmp_path / "evil.pt")
    with pytest.raises(UnsafeCheckpoint, match="refused"):
        read_checkpoint(blob, "bytes")
    assert not marker.exists()


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_policy_directory_with_malicious_checkpoint(tmp_path, runtime):
    marker = tmp_path / "pwned"
    policy = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY, policy)
    (policy / "student.pt").write_bytes(malicious_checkpoint(marker))
    with pytest.raises(UnsafeCheckpoint):
        load_policy(policy, runtime)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cableload_sim.cli",
            "simulate",
            "--planner",
            "student",
            "--policy",
            str(policy),
            "--runtime",
            runtime,
            "--duration",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "student.pt" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()


def test_resume_with_malicious_checkpoint_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    config_path = tmp_path / "tiny.toml"
    config_path.write_text(
        "[network]\n"
        + "".join(f"{k} = {v}\n" for k, v in TINY_NET.items())
        + "[dagger]\nrounds = 2\neval_s = 0.0\n"
    )
    config = train_config_from_dict({"network": TINY_NET, "dagger": {"rounds": 2, "eval_s": 0.0}})
    run = tmp_path / "run"
    store = RunStore(run)
    store.write_config({**config.to_dict(), "system": _system_config(config.system_config).to_dict()})
    store.checkpoint_path(0).parent.mkdir(parents=True)
    store.checkpoint_path(0).write_bytes(malicious_checkpoint(marker))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cableload_sim.cli",
            "train",
            "--config",
            str(config_path),
            "--out",
            str(run),
            "--resume",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "round_000.pt: refused" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


def test_worker_refuses_malicious_policy_bytes(tmp_path):
    """The bytes a DAgger worker (local process or Ray) receives go through the same check."""
    marker = tmp_path / "pwned"
    config = train_config_from_dict({"network": TINY_NET})
    task = EpisodeTask(
        config=config.to_dict(),
        system_config="paper",
        round_index=3,
        episode=0,
        beta=1.0,
        trajectory="eight-slow",
        orientation="constant",
        disturbance=None,
        policy=malicious_checkpoint(marker),
        seed=1,
    )
    with pytest.raises(UnsafeCheckpoint, match="round 3 policy: refused"):
        collect_episode(task)
    assert not marker.exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"PK\x03\x04" + bytes(100)] + [np.random.default_rng(seed).bytes(4096) for seed in range(40)],
)
def test_corrupted_checkpoint_is_a_clear_error(tmp_path, content):
    path = tmp_path / "student.pt"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpoint, match=r"student\.pt: not a readable checkpoint"):
        load_checkpoint(path)


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    blob = (SHIPPED_POLICY / "student.pt").read_bytes()
    path = tmp_path / "student.pt"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CorruptCheckpoint, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_written_checkpoints_hold_plain_values_only():
    """NumPy numbers in the extras (evaluation figures) become Python numbers, so every
    checkpoint this code writes loads under the weights-only rule."""
    net = StudentNet(NetworkConfig(**TINY_NET))
    blob = checkpoint_bytes(
        net, {"info": {"rmse": np.float64(0.02), "rounds": np.int64(3), "errors": np.array([1.0, 2.0])}}
    )
    data = read_checkpoint(blob, "written")
    assert data["info"] == {"rmse": 0.02, "rounds": 3, "errors": [1.0, 2.0]}
    assert type(data["info"]["rmse"]) is float
