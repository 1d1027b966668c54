"""Crash-safe storage of a training run: dataset shards, checkpoints, the resolved config.

Layout of a run directory::

    config.json                 resolved training config + system config (written first)
    data/round_007/ego.npy ...  the samples collected in round 7 (one shard per round, one
                                .npy per array, memory-mapped when read: a round's training
                                streams them from disk instead of holding them in memory)
    checkpoints/round_007.pt    network, optimizer, normalization after training on rounds <= 7
    summary.json                per-round figures (loss, evaluation RMSE, times)
    policy/                     the exported final policy (student.pt, student.onnx)

Every file is written to a temporary name in the same folder, flushed, synced and renamed, so
a run killed at any instant leaves only complete files: a round counts as done when its
checkpoint exists, and a shard without its checkpoint is reused on resume, never collected
twice. A shard folder is written under a temporary name and renamed whole. Shards written by
earlier versions as ``round_007.npz`` are still read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path

import numpy as np

from cableload_sim.errors import FileContentError, InputMissingError
from cableload_sim.io.files import atomic_write_json

SAMPLE_ARRAYS = ("ego", "load", "ref", "prior", "target", "t", "quad", "episode")


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
        return self.root / "data" / f"round_{round_index:03d}"

    def _legacy_shard_path(self, round_index: int) -> Path:
        return self.root / "data" / f"round_{round_index:03d}.npz"

    def write_shard(self, round_index: int, arrays: dict) -> None:
        missing = [k for k in SAMPLE_ARRAYS if k not in arrays]
        if missing:
            raise ValueError(f"shard for round {round_index}: missing arrays {missing}")
        final = self.shard_path(round_index)
        if self.has_shard(round_index):
            raise FileExistsError(
                f"{final}: the shard of round {round_index} exists; a shard is written once"
            )
        tmp = final.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{final.name}")
        tmp.mkdir(parents=True)
        try:
            for name in SAMPLE_ARRAYS:
                with open(tmp / f"{name}.npy", "wb") as fh:
                    np.save(fh, np.ascontiguousarray(arrays[name]))
                    fh.flush()
                    os.fsync(fh.fileno())
            os.rename(tmp, final)  # atomic; refuses an existing shard
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def has_shard(self, round_index: int) -> bool:
        return self.shard_path(round_index).is_dir() or self._legacy_shard_path(round_index).is_file()

    def read_shard(self, round_index: int) -> dict:
        folder = self.shard_path(round_index)
        if folder.is_dir():
            try:
                return {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in SAMPLE_ARRAYS}
            except (OSError, ValueError) as err:
                raise FileContentError(f"{folder}: unreadable shard ({err})") from None
        with np.load(self._legacy_shard_path(round_index)) as data:
            return {name: data[name] for name in SAMPLE_ARRAYS}

    def open_shards(self, upto: int) -> Samples:
        """The samples of rounds 0..upto, memory-mapped (read from disk as batches ask)."""
        return Samples([self.read_shard(k) for k in range(upto + 1)])

    def read_shards(self, upto: int) -> dict:
        """All samples of rounds 0..upto, concatenated in memory, with their round index."""
        parts = []
        for k in range(upto + 1):
            part = {name: np.asarray(value) for name, value in self.read_shard(k).items()}
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


class Samples:
    """Samples kept in several shards (arrays, memory-mapped or not), gathered by global index
    a batch at a time: a round's training never holds the aggregated dataset in memory."""

    def __init__(self, shards: list[dict]):
        self.shards = shards
        sizes = [len(shard["target"]) for shard in shards]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, name: str) -> np.ndarray:
        """One array of every shard, concatenated (in memory: for small arrays like ``t``)."""
        return np.concatenate([np.asarray(shard[name]) for shard in self.shards])

    def gather(self, indices: np.ndarray, names=("ego", "load", "ref", "prior", "target")) -> dict:
        """The samples at global ``indices``, in that order, as in-memory arrays."""
        indices = np.asarray(indices, dtype=np.int64)
        shard = np.searchsorted(self.starts, indices, side="right") - 1
        out = {}
        for name in names:
            first = self.shards[0][name]
            result = np.empty((len(indices), *first.shape[1:]), dtype=first.dtype)
            for k in np.unique(shard):
                rows = np.flatnonzero(shard == k)
                local = indices[rows] - self.starts[k]
                order = np.argsort(local)  # ascending reads from the memory map
                result[rows[order]] = self.shards[k][name][local[order]]
            out[name] = result
        return out
