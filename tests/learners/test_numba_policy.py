"""The numba runtime: the same outputs as the torch network for every option it compiles, its
tanh within its stated error, the MLP baseline refused, and a student flying with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cableload_sim.errors import UsageError
from learners.export import GENERALIST_POLICIES, TorchPolicy, export_policy, load_policy
from learners.network import NetworkConfig, StudentNet
from learners.numba_policy import NumbaPolicy, _tanh
from planners import make_planner
from planners.student import StudentPlanner

OUTPUTS = ("p", "v", "a", "j", "w")


def _net(seed: int = 0, history: int = 4, **options) -> StudentNet:
    torch.manual_seed(seed)
    net = StudentNet(NetworkConfig(history=history, **options))
    gen = torch.Generator().manual_seed(seed + 1)
    width = net.config.load_width
    # statistics far from 0 and 1, so that a normalization read from the wrong slot shows
    stats = {
        "ego_mean": torch.randn(18, generator=gen) * 0.3,
        "ego_std": 0.5 + torch.rand(18, generator=gen),
        "load_mean": torch.randn(width, generator=gen) * 0.3,
        "load_std": 0.5 + torch.rand(width, generator=gen),
        "ref_mean": torch.randn(18, generator=gen) * 0.3,
        "ref_std": 0.5 + torch.rand(18, generator=gen),
        "prior_mean": torch.randn(9, generator=gen) * 0.3,
        "prior_std": 0.5 + torch.rand(9, generator=gen),
        "out_mean": torch.randn(12, generator=gen) * 0.1,
        "out_std": 0.2 + torch.rand(12, generator=gen),
    }
    net.set_normalization(stats)
    with torch.no_grad():  # decoder weights large enough to reach tanh's flat ends
        for layer in net.hidden:
            layer.weight.mul_(3.0)
    return net.eval()


def _inputs(rng, batch: int, history: int, load_width: int):
    return (
        rng.normal(size=(batch, history, 18)),
        rng.normal(size=(batch, history, load_width)),
        rng.normal(size=(batch, 21, 18)),
        rng.normal(size=(batch, 21, 15)),
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"residual": False},
        {"error_inputs": True},
        {"ego_inputs": "pose"},
        {"channels": 16, "kernel": 2, "tcn_layers": 2, "decoder_layers": 2, "decoder_hidden": 40},
        {"history": 8, "decoder_layers": 4, "stream_features": 24, "latent": 48},
    ],
    ids=["default", "from-scratch", "error-inputs", "pose-only", "small", "deep"],
)
def test_numba_gives_the_torch_outputs(options):
    net = _net(3, **options)
    torch_policy, numba_policy = TorchPolicy(net), NumbaPolicy(net)
    rng = np.random.default_rng(5)
    for batch in (1, 3):
        inputs = _inputs(rng, batch, net.config.history, net.config.load_width)
        a = torch_policy(*inputs)
        b = numba_policy(*inputs)
        stacked = numba_policy.stacked(*inputs)
        for m, key in enumerate(OUTPUTS):
            assert b[key].shape == a[key].shape == (batch, 21, 3)
            scale = 1.0 + np.abs(a[key]).max()
            assert np.abs(a[key] - b[key]).max() < 2e-5 * scale, (key, np.abs(a[key] - b[key]).max())
            np.testing.assert_array_equal(stacked[:, m], b[key])
        if net.config.residual:  # the network's own part, not only the prior it adds to
            for m, key in enumerate(OUTPUTS):
                own_a = a[key] - inputs[3][..., 3 * m : 3 * m + 3]
                own_b = b[key] - inputs[3][..., 3 * m : 3 * m + 3]
                assert np.abs(own_a).max() > 1e-3
                assert np.abs(own_a - own_b).max() < 2e-5 * (1.0 + np.abs(own_a).max())


def test_its_tanh_is_within_its_stated_error():
    x = np.linspace(-12.0, 12.0, 200_001).astype(np.float32)
    ours = np.array([_tanh(np.float32(v)) for v in x[::97]], dtype=np.float64)
    exact = np.tanh(x[::97].astype(np.float64))
    assert np.abs(ours - exact).max() < 2.7e-7
    assert _tanh(np.float32(0.0)) == 0.0
    assert _tanh(np.float32(50.0)) > 0.9999997 and _tanh(np.float32(-50.0)) < -0.9999997


def test_the_mlp_baseline_is_refused_and_auto_runs_it_on_torch(tmp_path):
    torch.manual_seed(0)
    net = StudentNet(NetworkConfig(history=4, decoder="mlp")).eval()
    with pytest.raises(UsageError, match="pinn"):
        NumbaPolicy(net)
    export_policy(net, tmp_path)
    with pytest.raises(UsageError, match="pinn"):
        load_policy(tmp_path, "numba")
    policy, _, _ = load_policy(tmp_path)  # auto
    assert isinstance(policy, TorchPolicy)
    with pytest.raises(UsageError, match="runtime"):
        load_policy(tmp_path, "jax")


def test_auto_runs_a_pinn_policy_compiled_and_flies_as_torch(paper_config):
    """The shipped generalist planned by both runtimes from the same observations gives the
    same plans to a few micrometres."""
    from cableload_sim.physics.simulator import Simulator
    from cableload_sim.trajectories import make_reference

    directory = GENERALIST_POLICIES[3]
    policy, _, _ = load_policy(directory)
    assert isinstance(policy, NumbaPolicy)
    compiled = make_planner("student", paper_config, policy=directory)
    traced = make_planner("student", paper_config, policy=directory, runtime="torch")
    assert isinstance(compiled, StudentPlanner) and isinstance(compiled.policy, NumbaPolicy)
    sim = Simulator(paper_config)
    reference = make_reference("eight-medium")
    for _ in range(5):
        state = sim.world_state()
        a = compiled.plan(state, reference)
        b = traced.plan(state, reference)
        for x, y in zip(a, b, strict=True):
            assert np.abs(x.p - y.p).max() < 5e-6
            assert np.abs(x.v - y.v).max() < 5e-5
            assert np.abs(x.body_rates - y.body_rates).max() < 5e-5
        for i, plan in enumerate(a):
            sim.send_plan(i, plan)
        sim.advance(100)
    assert compiled.bad_outputs == 0
