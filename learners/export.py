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

import contextlib
import dataclasses
import io
import json
import math
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cableload_sim.errors import FileContentError, InputMissingError, UsageError
from cableload_sim.horizon import N_NODES
from cableload_sim.io.files import atomic_write_bytes
from learners.network import NetworkConfig, StudentNet
from planners.student import (
    EGO_FEATURES,
    ERROR_FEATURES,
    LOAD_FEATURES,
    POLICY_INPUTS,
    POLICY_OUTPUTS,
    PRIOR_CONVERGE_S,
    PRIOR_FEATURES,
    REF_FEATURES,
)

if TYPE_CHECKING:
    from cableload_sim.params import Config, SystemParams
    from cableload_sim.trajectories import LoadReference
    from learners.numba_policy import NumbaPolicy
    from planners.student import Policy, StudentPlanner

FORMAT = 2  # 2: the formation prior joined the inputs
OUTPUTS = POLICY_OUTPUTS
RUNTIMES = ("auto", "torch", "onnx", "numba")
"""How a policy's network can run: traced torch, onnxruntime on the exported model, or the
forward pass compiled with numba (``learners.numba_policy``: the ``pinn`` decoder only);
``auto``, the fastest that runs the network: numba for the ``pinn`` decoder, torch for the
``mlp`` baseline."""
POLICIES = Path(__file__).resolve().parent / "policies"
SHIPPED_POLICY = POLICIES / "paper-eight-medium"
"""The specialist: three quadrotors, trained on eight-medium (the paper's student)."""
SPECIALISTS = {
    3: SHIPPED_POLICY,
    4: POLICIES / "paper-eight-medium-n4",
    6: POLICIES / "paper-eight-medium-n6",
}
"""Students trained on eight-medium (``learners/configs/paper-eight-medium.toml``, with
``dagger.uavs = [n]`` for n other than 3), by number of quadrotors."""
GENERALIST_POLICIES = {
    3: POLICIES / "generalist-n3",
    4: POLICIES / "generalist-n4",
    6: POLICIES / "generalist-n6",
}
"""Generalists by number of quadrotors, trained on a distribution of references
(``learners/configs/generalist.toml``)."""


def default_policy(reference: LoadReference | None = None, n_uavs: int = 3) -> Path:
    """The shipped policy to fly ``reference`` with ``n_uavs`` quadrotors: the generalist for
    that number, when one is shipped, unless ``reference`` is eight-medium (constant
    orientation), which the specialist for that number flies; without a generalist, the
    specialist for that number, else the three-quadrotor one (flying it warns)."""
    generalist = GENERALIST_POLICIES.get(n_uavs)
    specialist = SPECIALISTS.get(n_uavs)
    if specialist is None or not (specialist / "student.pt").is_file():
        specialist = SHIPPED_POLICY
    if generalist is None or not (generalist / "student.pt").is_file():
        return specialist
    if reference is not None and _is_eight_medium(reference):
        return specialist
    return generalist


def _is_eight_medium(reference: LoadReference) -> bool:
    """Whether ``reference`` is the specialist's training reference: the same poses over a
    period."""
    from cableload_sim.trajectories import make_reference

    if getattr(reference, "name", None) != "eight-medium":
        return False
    trained = make_reference("eight-medium")
    assert trained.period_s is not None  # the eight is periodic
    t = np.linspace(0.0, trained.period_s, 97)
    a, b = reference.sample(t), trained.sample(t)
    return bool(np.allclose(a.p, b.p, atol=1e-9) and np.allclose(a.q, b.q, atol=1e-9))


class IncompatibleCheckpoint(FileContentError):
    """A checkpoint that this code cannot run: other features, horizon or format."""


class UnsafeCheckpoint(FileContentError):
    """A checkpoint that holds Python objects other than weights: refused unread."""


class CorruptCheckpoint(FileContentError):
    """A file that is not a readable checkpoint (truncated, random bytes, another format)."""


class PolicySystemWarning(UserWarning):
    """A policy flown on a system other than the one it was trained for (or not recorded)."""


def _interface(error_inputs: bool = False) -> dict:
    """The observation and output layout a network reads and writes (the error columns only
    for one with ``error_inputs``: networks without them read what they always did)."""
    interface = {
        "format": FORMAT,
        "ego_features": EGO_FEATURES,
        "load_features": LOAD_FEATURES,
        "ref_features": REF_FEATURES,
        "prior_features": PRIOR_FEATURES,
        "nodes": N_NODES,
    }
    if error_inputs:
        interface["error_features"] = ERROR_FEATURES
    return interface


def _plain(value: Any) -> Any:
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
    torch.save(
        {
            "interface": _interface(net.config.error_inputs),
            "network": net.config.to_dict(),
            "state_dict": net.state_dict(),
            **_plain(extra or {}),
        },
        buffer,
    )
    return buffer.getvalue()


def read_checkpoint(source: bytes | Path, name: str) -> dict:
    """The contents of a checkpoint (a file or its bytes), read as data only: nothing in it is
    executed. ``name`` is used in error messages."""
    try:
        data = torch.load(
            io.BytesIO(source) if isinstance(source, bytes) else source, map_location="cpu", weights_only=True
        )
    except pickle.UnpicklingError as err:
        lines = [line.strip() for line in str(err).splitlines()]
        reason = next((line for line in lines if "unsupported global" in line.lower()), None)
        if "weights only load failed" in str(err).lower() and reason is not None:
            raise UnsafeCheckpoint(
                f"{name}: refused: the file holds Python objects besides weights ({reason}); "
                "a checkpoint may hold only tensors, numbers, strings, lists and dicts, and "
                "nothing in it was run"
            ) from None
        detail = next(
            (line for line in lines if line.lower().startswith("unsupported")),
            lines[0] if lines else type(err).__name__,
        )
        raise CorruptCheckpoint(f"{name}: not a readable checkpoint ({detail})") from None
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as err:  # noqa: BLE001 - damaged bytes fail anywhere inside torch.load
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CorruptCheckpoint(f"{name}: not a readable checkpoint ({first})") from None
    if not isinstance(data, dict):
        raise CorruptCheckpoint(f"{name}: expected a checkpoint dict, found a {type(data).__name__}")
    return data


def save_checkpoint(path: Path, net: StudentNet, extra: dict | None = None) -> None:
    atomic_write_bytes(Path(path), checkpoint_bytes(net, extra))


def network_from_checkpoint(data: dict, source: str) -> StudentNet:
    interface = data.get("interface")
    network = data.get("network")
    expected = _interface(isinstance(network, dict) and network.get("error_inputs") is True)
    if interface != expected:
        differences = {
            k: (interface or {}).get(k) for k in expected if (interface or {}).get(k) != expected[k]
        }
        raise IncompatibleCheckpoint(
            f"{source}: checkpoint made for another observation or output layout {differences}; "
            f"this code expects {expected}"
        )
    try:
        config = NetworkConfig(**data["network"])
    except (TypeError, ValueError) as err:
        raise IncompatibleCheckpoint(f"{source}: unreadable network config: {err}") from err
    net = StudentNet(config)
    try:
        net.load_state_dict(data["state_dict"])
    except RuntimeError as err:
        raise IncompatibleCheckpoint(
            f"{source}: weights do not fit its network config: {str(err).splitlines()[0]}"
        ) from err
    return net


def load_checkpoint(path: Path) -> tuple[StudentNet, dict]:
    path = Path(path)
    if not path.is_file():
        raise InputMissingError(f"checkpoint {str(path)!r} does not exist")
    data = read_checkpoint(path, str(path))
    return network_from_checkpoint(data, str(path)), data


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the enclosed torch calls on ``threads`` intra-op threads, then restore the count.

    Torch's default (one thread per core) makes a small network's call wait for a busy core:
    with another job on the second core a call took 248 ms on two threads against 0.7 ms on
    one. Switching costs well under a microsecond.
    """
    previous = torch.get_num_threads()
    if previous != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if previous != threads:
            torch.set_num_threads(previous)


class TorchPolicy:
    """The network as a policy callable (numpy in, numpy out), traced for speed, run on
    ``threads`` torch threads (one: a planner's call must not wait for a busy core)."""

    def __init__(self, net: StudentNet, threads: int = 1):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise UsageError(f"threads: expected a whole number >= 1, got {threads!r}")
        self.net = net.eval()
        self.threads = threads
        self._traced: dict[int, torch.jit.ScriptModule] = {}

    def _fn(self, batch: int) -> Any:
        fn = self._traced.get(batch)
        if fn is None:
            h = self.net.config.history
            example = _example(batch, h, self.net.config.load_width)
            with torch.inference_mode():
                fn = torch.jit.trace(self.net, example, strict=False, check_trace=False)
                fn = torch.jit.freeze(fn)
            self._traced[batch] = fn
        return fn

    def __call__(self, ego: np.ndarray, load: np.ndarray, ref: np.ndarray, prior: np.ndarray) -> dict:
        with torch_threads(self.threads), torch.inference_mode():
            out = self._fn(len(ego))(
                *(torch.as_tensor(x, dtype=torch.float32) for x in (ego, load, ref, prior))
            )
        return {k: out[k].numpy().astype(np.float64) for k in OUTPUTS}


class PriorPolicy:
    """A residual policy with its network's output zeroed: every output is the formation
    prior's own (the ``prior`` input's p, v, a, j, w per node), so that the student planner
    flies its bare prior with the same encoding, prior and calibration, and what the network
    adds can be measured (``--planner student-prior``)."""

    def __call__(self, ego: np.ndarray, load: np.ndarray, ref: np.ndarray, prior: np.ndarray) -> dict:
        prior = np.asarray(prior, dtype=np.float64)
        return {k: prior[..., 3 * c : 3 * c + 3].copy() for c, k in enumerate(OUTPUTS)}


class _OnnxWrapper(torch.nn.Module):
    def __init__(self, net: StudentNet):
        super().__init__()
        self.net = net

    def forward(
        self, ego: torch.Tensor, load: torch.Tensor, ref: torch.Tensor, prior: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        out = self.net(ego, load, ref, prior)
        return tuple(out[k] for k in OUTPUTS)


INPUTS = POLICY_INPUTS


def _example(batch: int, history: int, load_width: int = LOAD_FEATURES) -> tuple:
    return (
        torch.zeros(batch, history, EGO_FEATURES),
        torch.zeros(batch, history, load_width),
        torch.zeros(batch, N_NODES, REF_FEATURES),
        torch.zeros(batch, N_NODES, PRIOR_FEATURES),
    )


def export_onnx(net: StudentNet, path: Path) -> None:
    example = _example(2, net.config.history, net.config.load_width)
    buffer = io.BytesIO()
    torch.onnx.export(
        _OnnxWrapper(net.eval()),
        example,
        buffer,  # type: ignore[arg-type]  # torch annotates paths only; dynamo=False writes to files too
        dynamo=False,
        input_names=list(INPUTS),
        output_names=list(OUTPUTS),
        dynamic_axes={name: {0: "batch"} for name in (*INPUTS, *OUTPUTS)},
        opset_version=17,
    )
    atomic_write_bytes(Path(path), buffer.getvalue())


ONNX_BATCH_SESSIONS = 4
"""How many batch sizes an ``OnnxPolicy`` keeps a session made for that size alone."""


class OnnxPolicy:
    """The exported network run by onnxruntime, one thread. Each batch size it is called with
    (up to ``ONNX_BATCH_SESSIONS`` of them) gets a session of its own with the batch dimension
    fixed, which onnxruntime's optimizer then folds through the shape arithmetic (the first
    call of a size builds it)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.session = self._make_session(None)
        except Exception as err:  # noqa: BLE001 - onnxruntime raises its own, untyped errors
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CorruptCheckpoint(f"{path}: not a readable ONNX model ({first})") from None
        names = [node.name for node in self.session.get_inputs()]
        if names != list(INPUTS):
            raise IncompatibleCheckpoint(
                f"{path}: ONNX model with inputs {names}; this code feeds {list(INPUTS)}"
            )
        self._dims = {str(node.shape[0]) for node in self.session.get_inputs()}
        self._by_batch: dict[int, object] = {}

    def _make_session(self, batch: int | None) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        if batch is not None:
            for name in self._dims:
                options.add_free_dimension_override_by_name(name, batch)
        return ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])

    def _session_for(self, batch: int) -> Any:
        session = self._by_batch.get(batch)
        if session is None:
            if len(self._by_batch) >= ONNX_BATCH_SESSIONS or self._dims != {"batch"}:
                return self.session
            session = self._by_batch[batch] = self._make_session(batch)
        return session

    def __call__(self, ego: np.ndarray, load: np.ndarray, ref: np.ndarray, prior: np.ndarray) -> dict:
        out = self._session_for(len(ego)).run(
            list(OUTPUTS),
            {name: np.asarray(x, dtype=np.float32) for name, x in zip(INPUTS, (ego, load, ref, prior))},
        )
        return {k: v.astype(np.float64) for k, v in zip(OUTPUTS, out)}


def export_policy(
    net: StudentNet, out_dir: Path, info: dict | None = None, system: SystemParams | None = None
) -> None:
    """Write ``student.pt``, ``student.onnx`` and ``policy.json`` (human-readable facts, with
    ``system``, the ``SystemParams`` trained on, so that flying another one is noticed)."""
    out_dir = Path(out_dir)
    save_checkpoint(out_dir / "student.pt", net, {"info": info or {}})
    export_onnx(net, out_dir / "student.onnx")
    facts = {
        "network": net.config.to_dict(),
        "interface": _interface(net.config.error_inputs),
        **_plain(info or {}),
    }
    if system is not None:
        facts["system"] = _plain(dataclasses.asdict(system))
    atomic_write_bytes(out_dir / "policy.json", json.dumps(facts, indent=1, default=float).encode())


def read_policy_info(policy_dir: Path) -> dict:
    """The facts of ``policy.json`` in a policy directory ({} when there is none)."""
    path = Path(policy_dir) / "policy.json"
    if not path.is_file():
        return {}
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FileContentError(f"{path}: not valid JSON ({err})") from None
    except OSError as err:
        raise FileContentError(f"{path}: cannot be read ({err.strerror})") from None
    if not isinstance(info, dict):
        raise FileContentError(f"{path}: expected a JSON object, found {type(info).__name__}")
    return info


def system_differences(trained: Any, flown: Any, path: str = "") -> list[str]:
    """How the system ``flown`` differs from ``trained`` (both ``dataclasses.asdict`` of a
    ``SystemParams``), one line per differing value, per-quadrotor lines merged as ``[*]``."""
    if isinstance(trained, dict) and isinstance(flown, dict):
        lines = []
        for key in sorted(trained.keys() | flown.keys()):
            if key not in trained and _neutral(flown[key]):
                continue  # a field newer than the record, at its neutral default
            lines += system_differences(
                trained.get(key), flown.get(key), f"{path}.{key}" if path else str(key)
            )
        return list(dict.fromkeys(lines))
    if isinstance(trained, list | tuple) and isinstance(flown, list | tuple):
        if len(trained) != len(flown):
            return [f"{path}: {len(trained)} entries (flying {len(flown)})"]
        lines = []
        for item_trained, item_flown in zip(trained, flown, strict=True):
            lines += system_differences(item_trained, item_flown, f"{path}[*]")
        return list(dict.fromkeys(lines))
    numbers = (int, float)
    if (
        isinstance(trained, numbers)
        and isinstance(flown, numbers)
        and not isinstance(trained, bool)
        and not isinstance(flown, bool)
    ):
        if math.isclose(trained, flown, rel_tol=1e-9, abs_tol=1e-12):
            return []
        return [f"{path} = {trained:g} (flying {flown:g})"]
    return [] if trained == flown else [f"{path} = {trained!r} (flying {flown!r})"]


def _neutral(value: Any) -> bool:
    """Whether ``value`` is a field's do-nothing default: None, false, zero, or all zeros."""
    if isinstance(value, list | tuple):
        return all(_neutral(item) for item in value)
    return value is None or value is False or (isinstance(value, int | float) and value == 0)


def check_policy_system(info: dict, system: SystemParams, policy_dir: str | Path) -> None:
    """Warn (``PolicySystemWarning``) when ``system`` is not the one the policy was trained
    for, naming what differs, or when the policy does not record it."""
    trained = info.get("system")
    if not isinstance(trained, dict):
        warnings.warn(
            f"policy {str(policy_dir)!r} does not record the system it was trained for "
            "(policy.json has no 'system'); its plans may not suit this one",
            PolicySystemWarning,
            stacklevel=3,
        )
        return
    differences = system_differences(trained, _plain(dataclasses.asdict(system)))
    if not differences:
        return
    n_trained = len(trained.get("quadrotors", []))
    if n_trained != system.n_uavs:  # the per-quadrotor lists differ in length: said once
        counted = f"{n_trained} entries (flying {system.n_uavs})"
        differences = [f"trained for {n_trained} quadrotors, flying {system.n_uavs}"] + [
            line for line in differences if not line.endswith(counted)
        ]
    shown = "; ".join(differences[:4]) + ("; ..." if len(differences) > 4 else "")
    warnings.warn(
        f"policy {str(policy_dir)!r} was trained for another system: {shown}",
        PolicySystemWarning,
        stacklevel=3,
    )


def network_policy(net: StudentNet, runtime: str = "auto") -> TorchPolicy | NumbaPolicy:
    """``net`` as a policy callable on ``runtime`` (``auto``, ``torch`` or ``numba``; the
    ``onnx`` runtime runs an exported file: ``load_policy``). ``auto``: compiled for the
    ``pinn`` decoder, traced torch for the ``mlp`` baseline."""
    if runtime == "auto":
        runtime = "numba" if net.config.decoder == "pinn" else "torch"
    if runtime == "torch":
        return TorchPolicy(net)
    if runtime == "numba":
        from learners.numba_policy import NumbaPolicy

        return NumbaPolicy(net)
    raise UsageError(f"runtime: expected auto, torch or numba for a network, got {runtime!r}")


def load_policy(policy_dir: str | Path | None = None, runtime: str = "auto") -> tuple[Policy, int, dict]:
    """(policy callable, history length, checkpoint data) of a policy directory (default: the
    shipped one)."""
    policy_dir = Path(policy_dir) if policy_dir is not None else SHIPPED_POLICY
    if runtime not in RUNTIMES:
        raise UsageError(f"runtime: expected one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if not policy_dir.is_dir():
        raise InputMissingError(f"policy directory {str(policy_dir)!r} does not exist")
    net, data = load_checkpoint(policy_dir / "student.pt")
    policy: TorchPolicy | OnnxPolicy | NumbaPolicy
    if runtime != "onnx":
        policy = network_policy(net, runtime)
    else:
        onnx_path = policy_dir / "student.onnx"
        if not onnx_path.is_file():
            raise InputMissingError(f"{str(onnx_path)!r} does not exist; export the policy first")
        policy = OnnxPolicy(onnx_path)
    return policy, net.config.history, data


def student_planner(
    config: Config,
    policy: str | Path | None = None,
    runtime: str = "auto",
    reference: LoadReference | None = None,
    network: bool = True,
) -> StudentPlanner:
    """The student planner flying the policy in directory ``policy`` (default:
    ``default_policy(reference, n)``) on ``config``'s system, warning when the policy was
    trained for another system (``planners.make_planner("student", config, policy=...,
    runtime=..., reference=...)`` calls this). ``network`` false: the same planner with the
    network's output zeroed (``PriorPolicy``; ``student-prior``), for a residual policy only."""
    from planners.student import StudentPlanner

    policy_dir = Path(policy) if policy is not None else default_policy(reference, config.system.n_uavs)
    callable_policy, history, data = load_policy(policy_dir, runtime)
    if not network:
        if not data.get("network", {}).get("residual", False):
            raise UsageError(
                f"student-prior: policy {str(policy_dir)!r} plans from scratch (residual = false), "
                "so it has no prior to fly; expected a residual policy"
            )
        callable_policy = PriorPolicy()
    info = read_policy_info(policy_dir)
    check_policy_system(info, config.system, policy_dir)
    frame = data.get("network", {}).get("frame", "world")
    prior = data.get("network", {}).get("prior", "formation-tilt")
    # the hover residual (planners.student.StudentPlanner.hover_residual, nearly the same at
    # every yaw in the load-yaw frame) is removed where the policy's validation chose it
    # (learners.dagger.hover_calibration_choice); policies that record no choice are calibrated
    # in the load-yaw frame. Measured here, not in a first decision
    calibrate = info.get("hover_calibration", frame == "load-yaw")
    if not isinstance(calibrate, bool):
        raise FileContentError(
            f"{Path(policy_dir) / 'policy.json'}: hover_calibration: "
            f"expected true or false, got {calibrate!r}"
        )
    converge = data.get("network", {}).get("prior_converge_s", PRIOR_CONVERGE_S)
    planner = StudentPlanner.from_config(
        config,
        callable_policy,
        history,
        frame=frame,
        prior=prior,
        hover_calibration=calibrate,
        prior_converge_s=converge,
        error_inputs=data.get("network", {}).get("error_inputs", False) is True,
        prior_from_state=data.get("network", {}).get("prior_from_state", False) is True,
    )
    if planner.hover_calibration:
        for i in range(config.system.n_uavs):
            planner.hover_residual(i)
    planner.policy_name = policy_dir.name  # reported with the metrics: which policy flew
    if not network:
        planner.name = "student-prior"
    return planner
