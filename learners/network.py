"""The student network: TCN encoders, dense fusion, and a physics-informed decoder.

Encoder: one temporal convolutional network per input stream (``ego`` and ``load`` histories,
sampled at the planner rate; ``ref``, the 21 horizon nodes), each a stack of dilated 1-D
convolutions with residual connections, read out at its last (newest or farthest) step and
projected by a dense layer; the projections are concatenated and fused into the latent vector x.

Decoder, physics-informed (``pinn``): one MLP ``F(x, tau) -> [p, omega]`` with tau the node time
over the horizon length; the position is ``F(tau) - F(0)``, so every plan starts exactly at the
quadrotor's own position, as all of the teacher's do. Velocity, acceleration and jerk are its
exact first, second and third time derivatives, propagated forward through every layer
together with the values (for ``z = W h + b``: z^(k) = W h^(k); for ``y = tanh(z)``, with s = 1 - y^2:
y' = s z', y'' = s z'' - 2 y s z'^2, y''' = s z''' - 6 y s z' z'' + (6 y^2 - 2) s z'^3).
Nothing is predicted separately, so v and a are consistent with p by construction.

Baseline (``mlp``): the same MLP predicting p, omega, v and a directly; its jerk is the finite
difference of its acceleration along the nodes.

Residual (``residual = true``, the default): the plan is the prior's (``planners.student``: the
formation-tilt slot joined from the own position, a stable if mediocre planner computed from the
reference alone) plus the decoder's output, and the prior's position, velocity and acceleration
over the horizon join the reference stream's input. The prior's derivatives are its own (exact
up to its finite differences), so the sum keeps v and a consistent with p. Why: imitation errors
then move the plan away from a flyable one by the size of the residual, not by the size of the
plan; without it the student's closed loop went unstable in most DAgger rounds (0.15-1.5 m).

Inputs and outputs are normalized with statistics stored in the module's buffers (and so in
every checkpoint).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import cast

import torch
from torch import nn

from cableload_sim.horizon import HORIZON_S, N_NODES, node_offsets
from planners.student import EGO_FEATURES, ERROR_FEATURES, LOAD_FEATURES, PRIOR_CONVERGE_S, REF_FEATURES

EGO_INPUTS = {
    "full": tuple(range(EGO_FEATURES)),
    "pose": (0, 1, 2, 6, 7, 8, 9, 10, 11, 15, 16, 17),
    "none": (),
}
"""The ego features each ``NetworkConfig.ego_inputs`` keeps (planners.student.EGO_FEATURES:
p 0-2, v 3-5, attitude 6-11, body rates 12-14, cable end 15-17)."""


@dataclass(frozen=True)
class NetworkConfig:
    """Sizes of the student network (defaults: the shipped policy's, chosen by measurement,
    see learners/README.md)."""

    history: int = 8
    """Past observations per history stream (planner periods)."""
    channels: int = 32
    """Channels of every TCN layer."""
    tcn_layers: int = 3
    """Dilated convolution layers per TCN (dilations 1, 2, 4, ...)."""
    kernel: int = 3
    """Convolution kernel size."""
    stream_features: int = 32
    """Output of each stream's dense projection."""
    latent: int = 64
    """Size of the fused latent vector x."""
    decoder: str = "pinn"
    """``pinn`` (derivatives of one MLP) or ``mlp`` (the baseline)."""
    decoder_hidden: int = 48
    """Width of the decoder's hidden layers."""
    decoder_layers: int = 3
    """Hidden layers of the decoder."""
    residual: bool = True
    """Plan relative to the formation prior (and see it as input), or from scratch."""
    frame: str = "world"
    """Axes of the inputs and outputs (``planners.student.FRAMES``): ``world`` or
    ``load-yaw`` (turning with the load's yaw: equivariant to yaw)."""
    zero_init: bool = False
    """Start the decoder's output layer at zero: an untrained student flies its prior exactly
    (with ``residual``), and training moves it away only as far as the labels pull it."""
    prior: str = "formation-tilt"
    """The formation the student plans relative to (``planners.student.PRIORS``):
    ``formation-tilt``, ``formation-wrench`` (its cables also supply the load reference's
    torque, so the load does not tilt as it accelerates) or ``formation-follow`` (the wrench
    formation following the load's transient error, which damps its swing)."""
    prior_converge_s: float = PRIOR_CONVERGE_S
    """Time constant (s) of the prior's approach from where the quadrotor is to its slot
    (``FormationPlanner.anchored``): the plans start at the quadrotor. Policies trained before
    it was an option used 0.5 s."""

    ego_inputs: str = "full"
    """What of the quadrotor's own history the network sees (``EGO_INPUTS``): ``full``; ``pose``
    (its velocity and body rates hidden, so that it cannot copy the motion it is making); or
    ``none`` (the ego stream hidden: the plan from the load, the reference and the prior)."""
    error_inputs: bool = False
    """The load stream also carries, per past observation, the load's position and attitude
    errors to the reference and the quadrotor's position and velocity less its slot's
    (``planners.student.ERROR_FEATURES``), each normalized by its own spread: the millimetre
    errors the teacher feeds back, which in the metre-scale features are lost."""

    prior_from_state: bool = False
    """The prior starts at the quadrotor's velocity as well as its position and joins its slot
    critically damped, as a teacher's plan starts at the state it saw: the residual then holds
    no copy of the quadrotor's own velocity (``FormationPlanner.anchored``)."""

    @property
    def load_width(self) -> int:
        """Columns of the load stream's input."""
        return LOAD_FEATURES + (ERROR_FEATURES if self.error_inputs else 0)

    def __post_init__(self):
        if self.ego_inputs not in EGO_INPUTS:
            raise ValueError(f"ego_inputs: expected one of {', '.join(EGO_INPUTS)}, got {self.ego_inputs!r}")
        if self.decoder not in ("pinn", "mlp"):
            raise ValueError(f"decoder: expected 'pinn' or 'mlp', got {self.decoder!r}")
        for name in (
            "history",
            "channels",
            "tcn_layers",
            "kernel",
            "stream_features",
            "latent",
            "decoder_hidden",
            "decoder_layers",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        if self.frame not in ("world", "load-yaw"):
            raise ValueError(f"frame: expected 'world' or 'load-yaw', got {self.frame!r}")
        if self.prior not in ("formation-tilt", "formation-wrench", "formation-follow"):
            raise ValueError(
                "prior: expected 'formation-tilt', 'formation-wrench' or "
                f"'formation-follow', got {self.prior!r}"
            )
        converge = self.prior_converge_s
        if (
            isinstance(converge, bool)
            or not isinstance(converge, int | float)
            or not math.isfinite(converge)
            or converge <= 0.0
        ):
            raise ValueError(f"prior_converge_s: expected a positive time (s), got {converge!r}")
        if not isinstance(self.zero_init, bool):
            raise ValueError(f"zero_init: expected true or false, got {self.zero_init!r}")
        if not isinstance(self.residual, bool):
            raise ValueError(f"residual: expected true or false, got {self.residual!r}")
        if not isinstance(self.error_inputs, bool):
            raise ValueError(f"error_inputs: expected true or false, got {self.error_inputs!r}")
        if not isinstance(self.prior_from_state, bool):
            raise ValueError(f"prior_from_state: expected true or false, got {self.prior_from_state!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class TemporalBlock(nn.Module):
    """Dilated causal 1-D convolution (kernel k: y_t = sum_m W_m x_{t - m d}, x_t = 0 before
    the first step), tanh, residual connection; evaluated only at the output steps the next
    layer needs.

    ``gather[m]`` lists, for each output step, the row of the input holding x_{t - m d} (the
    last row, a zero, where that step precedes the stream). One matrix product over the
    stacked shifted inputs: on streams this short it is several times faster than a
    convolution routine.
    """

    def __init__(self, channels_in: int, channels: int, kernel: int, gather: list[list[int]]):
        super().__init__()
        self.mix = nn.Linear(kernel * channels_in, channels)
        self.skip = nn.Linear(channels_in, channels, bias=False) if channels_in != channels else None
        for m, rows in enumerate(gather):
            self.register_buffer(f"rows{m}", torch.tensor(rows, dtype=torch.long))
        self.kernel = kernel

    def forward(self, x):
        """x: (batch, input rows, channels_in) -> (batch, output rows, channels)."""
        padded = torch.cat([x, torch.zeros_like(x[:, :1])], dim=1)
        shifted = [padded[:, getattr(self, f"rows{m}")] for m in range(self.kernel)]
        y = torch.tanh(self.mix(torch.cat(shifted, dim=-1)))
        here = shifted[0]
        return y + (here if self.skip is None else self.skip(here))


def _tcn_plan(steps: int, kernel: int, layers: int) -> list[tuple[list[int], list[int]]]:
    """Per layer (first to last): its input steps and output steps, keeping only what the last
    layer's single output (the final step) depends on. Dilations double: 1, 2, 4, ..."""
    outputs = [steps - 1]
    plan = []
    for layer in reversed(range(layers)):
        dilation = 2**layer
        inputs = sorted({t - m * dilation for t in outputs for m in range(kernel) if t - m * dilation >= 0})
        plan.append((inputs, outputs))
        outputs = inputs
    plan.reverse()
    return plan


def tcn_layers_for(steps: int, kernel: int, minimum: int) -> int:
    """Layers needed for the receptive field 1 + (kernel - 1)(2^L - 1) to span ``steps``."""
    layers = minimum
    while 1 + (kernel - 1) * (2**layers - 1) < steps:
        layers += 1
    return layers


class StreamEncoder(nn.Module):
    """TCN over one stream (batch, steps, features) -> (batch, out), read at the last step."""

    def __init__(self, features: int, steps: int, config: NetworkConfig):
        super().__init__()
        layers = tcn_layers_for(steps, config.kernel, config.tcn_layers)
        plan = _tcn_plan(steps, config.kernel, layers)
        blocks = []
        channels_in = features
        first_inputs = plan[0][0]
        self.register_buffer("inputs", torch.tensor(first_inputs, dtype=torch.long))
        for layer, (inputs, outputs) in enumerate(plan):
            dilation = 2**layer
            row_of = {t: r for r, t in enumerate(inputs)}
            zero_row = len(inputs)
            gather = [[row_of.get(t - m * dilation, zero_row) for t in outputs] for m in range(config.kernel)]
            blocks.append(TemporalBlock(channels_in, config.channels, config.kernel, gather))
            channels_in = config.channels
        self.tcn = nn.Sequential(*blocks)
        self.project = nn.Linear(config.channels, config.stream_features)

    def forward(self, x):
        return torch.tanh(self.project(self.tcn(x[:, self.inputs])[:, -1]))


PRIOR_INPUTS = 9  # the prior's p, v, a per node, fed to the reference stream


class StudentNet(nn.Module):
    """Student policy network; ``forward(ego, load, ref, prior)`` returns physical outputs
    (see ``predict``)."""

    # buffers (registered in __init__), typed for the checker
    tau: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor

    def __init__(self, config: NetworkConfig):
        super().__init__()
        self.config = config
        self.ego = StreamEncoder(EGO_FEATURES, config.history, config)
        self.load = StreamEncoder(config.load_width, config.history, config)
        # the reference is read from its far end back to now, so its "last step" is the present
        self.ref = StreamEncoder(REF_FEATURES + (PRIOR_INPUTS if config.residual else 0), N_NODES, config)
        self.fuse = nn.Sequential(
            nn.Linear(3 * config.stream_features, config.latent),
            nn.Tanh(),
            nn.Linear(config.latent, config.latent),
            nn.Tanh(),
        )
        width = config.decoder_hidden
        outputs = 6 if config.decoder == "pinn" else 12
        self.first = nn.Linear(config.latent, width)
        self.time_weight = nn.Parameter(torch.randn(width) * 0.5)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(config.decoder_layers - 1))
        self.out = nn.Linear(width, outputs)
        if config.zero_init:
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)
        tau = torch.tensor(node_offsets() / HORIZON_S, dtype=torch.float32)
        self.register_buffer("tau", tau)
        # normalization statistics (set from data by ``set_normalization``)
        for name, size in (
            ("ego", EGO_FEATURES),
            ("load", config.load_width),
            ("ref", REF_FEATURES),
            ("prior", PRIOR_INPUTS),
        ):
            self.register_buffer(f"{name}_mean", torch.zeros(size))
            self.register_buffer(f"{name}_std", torch.ones(size))
        self.register_buffer("out_mean", torch.zeros(12))  # p, w, v, a
        self.register_buffer("out_std", torch.ones(12))
        mask = torch.zeros(EGO_FEATURES)
        mask[list(EGO_INPUTS[config.ego_inputs])] = 1.0
        self.register_buffer("ego_mask", mask, persistent=False)  # from the config, not stored

    # -- normalization -----------------------------------------------------------------------

    def set_normalization(self, stats: dict) -> None:
        """Set input and output statistics from a dict of numpy arrays (see ``data_stats``)."""
        for key, value in stats.items():
            getattr(self, key).copy_(torch.as_tensor(value, dtype=torch.float32))

    # -- encoder -----------------------------------------------------------------------------

    def encode(self, ego, load, ref, prior):
        ego = (ego - self.ego_mean) / self.ego_std * self.ego_mask
        load = (load - self.load_mean) / self.load_std
        ref = (ref - self.ref_mean) / self.ref_std
        if self.config.residual:
            prior = (prior[..., :PRIOR_INPUTS] - self.prior_mean) / self.prior_std
            ref = torch.cat([ref, prior], dim=-1)
        parts = [self.ego(ego), self.load(load), self.ref(torch.flip(ref, dims=[1]))]
        return self.fuse(torch.cat(parts, dim=-1))

    # -- decoders ----------------------------------------------------------------------------

    def _pinn(self, latent, tau, with_jerk: bool):
        """Values and exact tau-derivatives (orders 0..2, and 3 with ``with_jerk``) of F at the
        node times ``tau`` (normalized)."""
        base = self.first(latent)[:, None, :]  # (B, 1, W)
        z0 = base + tau[None, :, None] * self.time_weight  # (B, K, W)
        z1 = self.time_weight.expand_as(z0)
        jet = _tanh_jet(z0, z1, None, None, with_jerk)
        orders = 4 if with_jerk else 3
        for layer in self.hidden:
            z = _linear_jet(cast(nn.Linear, layer), jet, orders)
            jet = _tanh_jet(z[0], z[1], z[2], z[3] if with_jerk else None, with_jerk)
        z = _linear_jet(self.out, jet, orders)
        return z[0], z[1], z[2], (z[3] if with_jerk else None)

    def forward(self, ego, load, ref, prior):
        """Physical outputs, each (B, 21, 3): p (relative to the own position at planning time),
        v, a, j (world axes), w (body rates)."""
        return self.predict(ego, load, ref, prior)

    def predict(self, ego, load, ref, prior, nodes=None, with_jerk: bool = True):
        """``forward`` at a subset of the nodes (indices ``nodes``, training) and optionally
        without the jerk (which no loss uses)."""
        out = self._decode(self.encode(ego, load, ref, prior), nodes, with_jerk)
        if self.config.residual:
            if nodes is not None:
                prior = prior[:, nodes]
            for key, column in (("p", 0), ("v", 3), ("a", 6), ("j", 9), ("w", 12)):
                if key in out:
                    out[key] = out[key] + prior[..., column : column + 3]
        return out

    def _decode(self, latent, nodes, with_jerk: bool):
        tau = self.tau if nodes is None else self.tau[nodes]
        # the plan starts where the quadrotor is: p(t) = F(t) - F(0), the constant shift leaving
        # every derivative exact
        tau = torch.cat([torch.zeros_like(tau[:1]), tau])
        mean, std = self.out_mean, self.out_std
        if self.config.decoder == "pinn":
            f0, f1, f2, f3 = self._pinn(latent, tau, with_jerk)
            start = f0[:, :1, 0:3]
            f0, f1, f2 = f0[:, 1:], f1[:, 1:], f2[:, 1:]
            f3 = f3[:, 1:] if with_jerk else None
            scale = std[0:3]
            out = {
                "p": scale * (f0[..., 0:3] - start),
                "v": scale * f1[..., 0:3] / HORIZON_S,
                "a": scale * f2[..., 0:3] / HORIZON_S**2,
                "w": mean[3:6] + std[3:6] * f0[..., 3:6],
            }
            if with_jerk:
                assert f3 is not None  # computed with_jerk
                out["j"] = scale * f3[..., 0:3] / HORIZON_S**3
            return out
        y = torch.tanh(self.first(latent)[:, None, :] + tau[None, :, None] * self.time_weight)
        for layer in self.hidden:
            y = torch.tanh(layer(y))
        raw = mean + std * self.out(y)
        start = raw[:, :1, 0:3]
        raw = raw[:, 1:]
        out = {"p": raw[..., 0:3] - start, "w": raw[..., 3:6], "v": raw[..., 6:9], "a": raw[..., 9:12]}
        if with_jerk:
            out["j"] = _node_gradient(out["a"], tau[1:] * HORIZON_S)
        return out


def _linear_jet(layer: nn.Linear, jet, orders: int) -> list:
    """``layer`` applied to a value and its derivatives (only the value gets the bias), as one
    matrix product over them stacked along the batch: fewer, larger products are faster."""
    z = list(torch.chunk(torch.cat(jet[:orders], dim=0) @ layer.weight.T, orders, dim=0))
    z[0] = z[0] + layer.bias
    return z


def _tanh_jet(z0, z1, z2, z3, with_third: bool = True):
    """tanh and its first three derivatives along t, given those of its argument (z2, z3 None:
    zero); the third is skipped (None) without ``with_third``."""
    y = torch.tanh(z0)
    s = 1.0 - y * y
    ys = y * s
    y1 = s * z1
    z1z1 = z1 * z1
    y2 = -2.0 * ys * z1z1 if z2 is None else s * z2 - 2.0 * ys * z1z1
    if not with_third:
        return y, y1, y2, None
    cube = (6.0 * y * y - 2.0) * s * z1z1 * z1
    y3 = cube if z2 is None else (s * z3 if z3 is not None else 0.0) - 6.0 * ys * z1 * z2 + cube
    return y, y1, y2, y3


def _node_gradient(values, t):
    """d values / dt along the nodes (dim 1), second-order on the non-uniform grid."""
    dt_f = (t[2:] - t[1:-1])[None, :, None]
    dt_b = (t[1:-1] - t[:-2])[None, :, None]
    f, c, b = values[:, 2:], values[:, 1:-1], values[:, :-2]
    inner = (f * dt_b**2 - b * dt_f**2 + c * (dt_f**2 - dt_b**2)) / (dt_b * dt_f * (dt_b + dt_f))
    first = (values[:, 1:2] - values[:, 0:1]) / (t[1] - t[0])
    last = (values[:, -1:] - values[:, -2:-1]) / (t[-1] - t[-2])
    return torch.cat([first, inner, last], dim=1)
