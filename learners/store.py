"""Crash-safe storage of a training run: dataset shards, checkpoints, the resolved config.

Layout of a run directory::

    config.json                 resolved training config + system config (written first)
    data/round_007.npz          the samples collected in round 7 (one shard per round)
    checkpoints/round_007.pt    network, optimizer, normalization after training on rounds <= 7
    summary.json                per-round figures (loss, evaluation RMSE, times)
    policy/                     the exported final policy (student.pt, student.onnx)

Every file is written to a temporary name in the same folder, flushed, synced and renamed, so
a run killed at any instant leaves only complete files: a round counts as done when its
checkpoint exists, and a shard without its checkpoint is reused on resume, never collected
twice.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np

from cableload_sim.errors import FileContentError, InputMissingError
from cableload_sim.files import atomic_write_bytes

SAMPLE_ARRAYS = ("ego", "load", "ref", "prior", "target", "t", "quad", "episode")


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=1, default=float).encode())


class RunStore:
    """One training run's directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    # -- config ------------------------------------------------------------------------------

    def write_config(self, resolved: dict) -> None:
        atomic_write_json(self.root / "config.json", resolved)

    def read_config(self) -> dict:
        path = self.root / "config.json"
        if not path.is_file():
            raise InputMissingError(f"{self.root} holds no training run (no config.json)")
        try:
            return json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise FileContentError(f"{path}: not valid JSON ({err})") from None

    # -- dataset -----------------------------------------------------------------------------

    def shard_path(self, round_index: int) -> Path:
        return self.root / "data" / f"round_{round_index:03d}.npz"

    def write_shard(self, round_index: int, arrays: dict) -> None:
        missing = [k for k in SAMPLE_ARRAYS if k not in arrays]
        if missing:
            raise ValueError(f"shard for round {round_index}: missing arrays {missing}")
        buffer = io.BytesIO()
        np.savez(buffer, **{k: arrays[k] for k in SAMPLE_ARRAYS})
        atomic_write_bytes(self.shard_path(round_index), buffer.getvalue())

    def has_shard(self, round_index: int) -> bool:
        return self.shard_path(round_index).is_file()

    def read_shards(self, upto: int) -> dict:
        """All samples of rounds 0..upto, concatenated, with their round index."""
        parts = []
        for k in range(upto + 1):
            with np.load(self.shard_path(k)) as data:
                part = {name: data[name] for name in SAMPLE_ARRAYS}
            part["round"] = np.full(len(part["t"]), k, dtype=np.int32)
            parts.append(part)
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}

    # -- checkpoints -------------------------------------------------------------------------

    def checkpoint_path(self, round_index: int) -> Path:
        return self.root / "checkpoints" / f"round_{round_index:03d}.pt"

    def completed_rounds(self) -> list[int]:
        folder = self.root / "checkpoints"
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("round_*.pt"):
            match = re.fullmatch(r"round_(\d{3})\.pt", path.name)
            if match:
                found.append(int(match.group(1)))
        return sorted(found)

    # -- summary -----------------------------------------------------------------------------

    def read_summary(self) -> list[dict]:
        path = self.root / "summary.json"
        return json.loads(path.read_text()) if path.is_file() else []

    def write_summary(self, rows: list[dict]) -> None:
        atomic_write_json(self.root / "summary.json", rows)
