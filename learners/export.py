"""Checkpoints, exported policies and the policy callables the student planner runs.

A checkpoint is a state dict plus what is needed to rebuild and check the network: its
``NetworkConfig``, the feature sizes of the observation encoding and the horizon length (never
a pickled object). A policy directory holds ``student.pt`` (the same) and ``student.onnx`` (the
whole network, derivatives of the decoder included, for onnxruntime).

Policies and training runs are exchanged between researchers, so a checkpoint is read as data
only (``torch.load(..., weights_only=True)``: tensors, numbers, strings, lists and dicts). A file
that holds any other Python object is refused before anything in it runs (``UnsafeCheckpoint``);
every checkpoint this module writes holds plain values only (``_plain``).
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np
import torch

from cableload_sim.errors import FileContentError
from cableload_sim.horizon import N_NODES
from learners.network import NetworkConfig, StudentNet
from learners.store import atomic_write_bytes
from planners.student import EGO_FEATURES, LOAD_FEATURES, PRIOR_FEATURES, REF_FEATURES

FORMAT = 2  # 2: the formation prior joined the inputs
OUTPUTS = ("p", "v", "a", "j", "w")
SHIPPED_POLICY = Path(__file__).resolve().parent / "policies" / "paper-eight-medium"


class IncompatibleCheckpoint(FileContentError):
    """A checkpoint that this code cannot run: other features, horizon or format."""


class UnsafeCheckpoint(FileContentError):
    """A checkpoint that holds Python objects other than weights: refused unread."""


class CorruptCheckpoint(FileContentError):
    """A file that is not a readable checkpoint (truncated, random bytes, another format)."""


def _interface() -> dict:
    return {"format": FORMAT, "ego_features": EGO_FEATURES, "load_features": LOAD_FEATURES,
            "ref_features": REF_FEATURES, "prior_features": PRIOR_FEATURES, "nodes": N_NODES}


def _plain(value):
    """``value`` with NumPy scalars and arrays turned into Python numbers and lists, so that a
    weights-only load accepts it; tensors and plain values pass through."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return value


def checkpoint_bytes(net: StudentNet, extra: dict | None = None) -> bytes:
    buffer = io.BytesIO()
    torch.save({"interface": _interface(), "network": net.config.to_dict(),
                "state_dict": net.state_dict(), **_plain(extra or {})}, buffer)
    return buffer.getvalue()


def read_checkpoint(source: bytes | Path, name: str) -> dict:
    """The contents of a checkpoint (a file or its bytes), read as data only: nothing in it is
    executed. ``name`` is used in error messages."""
    try:
        data = torch.load(io.BytesIO(source) if isinstance(source, bytes) else source,
                          map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "weights only load failed" in str(err).lower():
            reason = next((line.strip() for line in str(err).splitlines()
                           if "unsupported global" in line.lower()), "a non-weight object")
            raise UnsafeCheckpoint(
                f"{name}: refused: the file holds Python objects besides weights ({reason}); "
                "a checkpoint may hold only tensors, numbers, strings, lists and dicts, and "
                "nothing in it was run") from None
        raise CorruptCheckpoint(f"{name}: not a readable checkpoint ({err})") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError) as err:
        if isinstance(err, FileNotFoundError | PermissionError | IsADirectoryError):
            raise
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CorruptCheckpoint(f"{name}: not a readable checkpoint ({first})") from None
    if not isinstance(data, dict):
        raise CorruptCheckpoint(f"{name}: expected a checkpoint dict, found a "
                                f"{type(data).__name__}")
    return data


def save_checkpoint(path: Path, net: StudentNet, extra: dict | None = None) -> None:
    atomic_write_bytes(Path(path), checkpoint_bytes(net, extra))


def network_from_checkpoint(data: dict, source: str) -> StudentNet:
    interface = data.get("interface")
    expected = _interface()
    if interface != expected:
        differences = {k: (interface or {}).get(k) for k in expected
                       if (interface or {}).get(k) != expected[k]}
        raise IncompatibleCheckpoint(
            f"{source}: checkpoint made for another observation or output layout {differences}; "
            f"this code expects {expected}")
    try:
        config = NetworkConfig(**data["network"])
    except (TypeError, ValueError) as err:
        raise IncompatibleCheckpoint(f"{source}: unreadable network config: {err}") from err
    net = StudentNet(config)
    try:
        net.load_state_dict(data["state_dict"])
    except RuntimeError as err:
        raise IncompatibleCheckpoint(f"{source}: weights do not fit its network config: "
                                     f"{str(err).splitlines()[0]}") from err
    return net


def load_checkpoint(path: Path) -> tuple[StudentNet, dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    data = read_checkpoint(path, str(path))
    return network_from_checkpoint(data, str(path)), data


class TorchPolicy:
    """The network as a policy callable (numpy in, numpy out), traced for speed."""

    def __init__(self, net: StudentNet):
        self.net = net.eval()
        self._traced = {}

    def _fn(self, batch: int):
        fn = self._traced.get(batch)
        if fn is None:
            h = self.net.config.history
            example = _example(batch, h)
            with torch.inference_mode():
                fn = torch.jit.trace(self.net, example, strict=False, check_trace=False)
                fn = torch.jit.freeze(fn)
            self._traced[batch] = fn
        return fn

    def __call__(self, ego, load, ref, prior) -> dict:
        with torch.inference_mode():
            out = self._fn(len(ego))(*(torch.as_tensor(x, dtype=torch.float32)
                                       for x in (ego, load, ref, prior)))
        return {k: out[k].numpy().astype(np.float64) for k in OUTPUTS}


class _OnnxWrapper(torch.nn.Module):
    def __init__(self, net: StudentNet):
        super().__init__()
        self.net = net

    def forward(self, ego, load, ref, prior):
        out = self.net(ego, load, ref, prior)
        return tuple(out[k] for k in OUTPUTS)


INPUTS = ("ego", "load", "ref", "prior")


def _example(batch: int, history: int) -> tuple:
    return (torch.zeros(batch, history, EGO_FEATURES), torch.zeros(batch, history, LOAD_FEATURES),
            torch.zeros(batch, N_NODES, REF_FEATURES), torch.zeros(batch, N_NODES, PRIOR_FEATURES))


def export_onnx(net: StudentNet, path: Path) -> None:
    example = _example(2, net.config.history)
    buffer = io.BytesIO()
    torch.onnx.export(_OnnxWrapper(net.eval()), example, buffer, dynamo=False,
                      input_names=list(INPUTS), output_names=list(OUTPUTS),
                      dynamic_axes={name: {0: "batch"} for name in (*INPUTS, *OUTPUTS)},
                      opset_version=17)
    atomic_write_bytes(Path(path), buffer.getvalue())


class OnnxPolicy:
    """The exported network run by onnxruntime, one thread."""

    def __init__(self, path: Path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options,
                                            providers=["CPUExecutionProvider"])

    def __call__(self, ego, load, ref, prior) -> dict:
        out = self.session.run(list(OUTPUTS), {
            name: np.asarray(x, dtype=np.float32)
            for name, x in zip(INPUTS, (ego, load, ref, prior))})
        return {k: v.astype(np.float64) for k, v in zip(OUTPUTS, out)}


def export_policy(net: StudentNet, out_dir: Path, info: dict | None = None) -> None:
    """Write ``student.pt``, ``student.onnx`` and ``policy.json`` (human-readable facts)."""
    out_dir = Path(out_dir)
    save_checkpoint(out_dir / "student.pt", net, {"info": info or {}})
    export_onnx(net, out_dir / "student.onnx")
    atomic_write_bytes(out_dir / "policy.json", json.dumps(
        {"network": net.config.to_dict(), "interface": _interface(), **_plain(info or {})},
        indent=1, default=float).encode())


def load_policy(policy_dir: str | Path | None = None, runtime: str = "torch"):
    """(policy callable, history length, checkpoint data) of a policy directory (default: the
    shipped one)."""
    policy_dir = Path(policy_dir) if policy_dir is not None else SHIPPED_POLICY
    net, data = load_checkpoint(policy_dir / "student.pt")
    if runtime == "torch":
        policy = TorchPolicy(net)
    elif runtime == "onnx":
        onnx_path = policy_dir / "student.onnx"
        if not onnx_path.is_file():
            raise FileNotFoundError(f"{str(onnx_path)!r} does not exist; export the policy first")
        policy = OnnxPolicy(onnx_path)
    else:
        raise ValueError(f"runtime: expected 'torch' or 'onnx', got {runtime!r}")
    return policy, net.config.history, data
