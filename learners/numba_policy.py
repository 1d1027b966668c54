"""The student network's forward pass compiled with numba: the ``numba`` runtime of a policy.

onnxruntime runs the exported network as about 220 small operators, and on one quadrotor's
decision most of its time is each operator's own overhead, not arithmetic. Here the whole pass
is one compiled call: the three TCN encoders, the fusion and the physics-informed decoder with
its exact time derivatives (``learners.network``), in single precision as the exported network
computes. Every weight is packed into one float32 buffer and every shape and offset into one
integer buffer, so a call unpacks seven arrays, not fifty.

Only the ``pinn`` decoder is compiled (``NumbaPolicy`` refuses the ``mlp`` baseline); residual
and non-residual networks, every frame and input option are. ``tests/learners/test_numba_policy.py``
checks it against the torch network.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cableload_sim.errors import UsageError
from cableload_sim.horizon import HORIZON_S, N_NODES
from learners.network import PRIOR_INPUTS, StudentNet
from planners.student import EGO_FEATURES, POLICY_OUTPUTS, PRIOR_FEATURES, REF_FEATURES

# fixed slots of the integer buffer: sizes, then offsets into it (streams) or into the weights
(
    H_HISTORY,
    H_RESIDUAL,
    H_WIDTH,
    H_HIDDEN,
    H_LATENT,
    H_STREAM,
    H_EGO,
    H_LOAD,
    H_REF,
    H_NORM,
    H_FUSE,
    H_DECODER,
    H_SIZE,
) = range(13)

# at meta[H_NORM:] the weights' offsets of the mean and std of ego, load, ref and prior, then
# of the ego mask; at meta[H_FUSE:] the fusion's two linears (W, b each); at meta[H_DECODER:]
# the decoder's first linear, time weights, hidden linears, output linear, node times and
# output statistics (``pack``)


class _Packer:
    def __init__(self) -> None:
        self.weights: list[np.ndarray] = []
        self.size = 0
        self.meta: list[int] = [0] * H_SIZE

    def add(self, tensor) -> int:
        """Append a tensor's values (row-major); returns its offset in the weights."""
        values = np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype=np.float32).ravel()
        offset = self.size
        self.weights.append(values)
        self.size += values.size
        return offset

    def stream(self, encoder) -> int:
        """An encoder's description: its input steps, then per block (in, out channels,
        kernel, output steps, the gather rows, mix W and b, skip W or -1), then its projection."""
        start = len(self.meta)
        inputs = encoder.inputs.tolist()
        self.meta += [len(inputs), *inputs, len(encoder.tcn)]
        for block in encoder.tcn:
            rows = [getattr(block, f"rows{m}").tolist() for m in range(block.kernel)]
            cin = block.mix.in_features // block.kernel
            self.meta += [cin, block.mix.out_features, block.kernel, len(rows[0])]
            for r in rows:
                self.meta += r
            skip = -1 if block.skip is None else self.add(block.skip.weight)
            self.meta += [self.add(block.mix.weight), self.add(block.mix.bias), skip]
        self.meta += [self.add(encoder.project.weight), self.add(encoder.project.bias)]
        return start


def pack(net: StudentNet) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32, meta int64) of a ``pinn`` network, the compiled pass's input."""
    config = net.config
    if config.decoder != "pinn":
        raise UsageError(
            f"the numba runtime runs the 'pinn' decoder; this network's is {config.decoder!r}: "
            "run it with the runtime auto, torch or onnx"
        )
    p = _Packer()
    p.meta[H_HISTORY] = config.history
    p.meta[H_RESIDUAL] = int(config.residual)
    p.meta[H_WIDTH] = config.decoder_hidden
    p.meta[H_HIDDEN] = len(net.hidden)
    p.meta[H_LATENT] = config.latent
    p.meta[H_STREAM] = config.stream_features
    p.meta[H_EGO] = p.stream(net.ego)
    p.meta[H_LOAD] = p.stream(net.load)
    p.meta[H_REF] = p.stream(net.ref)
    p.meta[H_NORM] = len(p.meta)
    p.meta += [
        p.add(getattr(net, name))
        for name in (
            "ego_mean",
            "ego_std",
            "load_mean",
            "load_std",
            "ref_mean",
            "ref_std",
            "prior_mean",
            "prior_std",
            "ego_mask",
        )
    ]
    p.meta[H_FUSE] = len(p.meta)
    p.meta += [p.add(net.fuse[0].weight), p.add(net.fuse[0].bias)]
    p.meta += [p.add(net.fuse[2].weight), p.add(net.fuse[2].bias)]
    p.meta[H_DECODER] = len(p.meta)
    p.meta += [p.add(net.first.weight), p.add(net.first.bias), p.add(net.time_weight)]
    for layer in net.hidden:
        p.meta += [p.add(layer.weight), p.add(layer.bias)]
    p.meta += [p.add(net.out.weight), p.add(net.out.bias)]
    p.meta += [p.add(net.tau), p.add(net.out_mean), p.add(net.out_std)]
    return np.concatenate(p.weights).astype(np.float32), np.asarray(p.meta, dtype=np.int64)


@njit(fastmath=True, cache=True, inline="always")
def _tanh(x):
    """tanh in single precision as a rational function of x (degree 13 over 6, the inputs
    clamped to +-7.9053), which the compiler vectorizes: 2 ns a value where the C library's
    tanhf takes 16. Within 2.7e-7 of tanh everywhere (``tests/learners/test_numba_policy.py``)."""
    c = np.float32(7.90531110763549805)
    x = min(max(x, -c), c)
    x2 = x * x
    p = np.float32(-2.76076847742355e-16)
    p = p * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    q = np.float32(1.19825839466702e-06)
    q = q * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    return p * x / q


@njit(fastmath=True, cache=True)
def _linear(x, wf, w_off, b_off, n_out, out):
    """out[r, j] = b[j] + sum_k W[j, k] x[r, k] (W row-major at ``w_off``; b_off < 0: none).
    Each product runs over contiguous rows, four of W's at a time against one of x (each x
    loaded once for four outputs), so that it compiles to vector instructions wherever it is
    inlined (indexed into the whole buffer it did in some callers only: 8x slower there)."""
    rows, n_in = x.shape
    for r in range(rows):
        xr = x[r]
        j = 0
        while j + 4 <= n_out:
            start = w_off + j * n_in
            w0 = wf[start : start + n_in]
            w1 = wf[start + n_in : start + 2 * n_in]
            w2 = wf[start + 2 * n_in : start + 3 * n_in]
            w3 = wf[start + 3 * n_in : start + 4 * n_in]
            a0 = np.float32(0.0)
            a1 = np.float32(0.0)
            a2 = np.float32(0.0)
            a3 = np.float32(0.0)
            for k in range(n_in):
                v = xr[k]
                a0 += w0[k] * v
                a1 += w1[k] * v
                a2 += w2[k] * v
                a3 += w3[k] * v
            out[r, j] = a0
            out[r, j + 1] = a1
            out[r, j + 2] = a2
            out[r, j + 3] = a3
            j += 4
        while j < n_out:
            start = w_off + j * n_in
            wr = wf[start : start + n_in]
            acc = np.float32(0.0)
            for k in range(n_in):
                acc += wr[k] * xr[k]
            out[r, j] = acc
            j += 1
        if b_off >= 0:
            for j in range(n_out):
                out[r, j] += wf[b_off + j]


@njit(fastmath=True, cache=True)
def _stream(x, wf, meta, cursor, n_stream):
    """One TCN encoder (the description at meta[cursor:]) over x (steps, features): its
    projection's tanh (n_stream,)."""
    n_inputs = meta[cursor]
    cursor += 1
    features = x.shape[1]
    cur = np.empty((n_inputs + 1, features), dtype=np.float32)
    for t in range(n_inputs):
        cur[t, :] = x[meta[cursor + t], :]
    cur[n_inputs, :] = 0.0  # the zero row before the stream
    cursor += n_inputs
    n_blocks = meta[cursor]
    cursor += 1
    for _ in range(n_blocks):
        cin, cout, kernel, n_out = meta[cursor], meta[cursor + 1], meta[cursor + 2], meta[cursor + 3]
        rows = cursor + 4
        cursor = rows + kernel * n_out
        skip_off, mix_w, mix_b = meta[cursor + 2], meta[cursor], meta[cursor + 1]
        cursor += 3
        stacked = np.empty((n_out, kernel * cin), dtype=np.float32)
        for t in range(n_out):
            for m in range(kernel):
                src = meta[rows + m * n_out + t]
                for c in range(cin):
                    stacked[t, m * cin + c] = cur[src, c]
        y = np.empty((n_out + 1, cout), dtype=np.float32)
        _linear(stacked, wf, mix_w, mix_b, cout, y)
        here = np.empty((n_out, cin), dtype=np.float32)
        for t in range(n_out):
            src = meta[rows + t]
            for c in range(cin):
                here[t, c] = cur[src, c]
        if skip_off >= 0:
            skipped = np.empty((n_out, cout), dtype=np.float32)
            _linear(here, wf, skip_off, -1, cout, skipped)
        else:
            skipped = here
        for t in range(n_out):
            for c in range(cout):
                y[t, c] = _tanh(y[t, c]) + skipped[t, c]
        y[n_out, :] = 0.0
        cur = y
        n_inputs = n_out
    last = np.empty((1, cur.shape[1]), dtype=np.float32)
    last[0, :] = cur[n_inputs - 1, :]
    projected = np.empty((1, n_stream), dtype=np.float32)
    _linear(last, wf, meta[cursor], meta[cursor + 1], n_stream, projected)
    out = np.empty(n_stream, dtype=np.float32)
    for j in range(n_stream):
        out[j] = _tanh(projected[0, j])
    return out


@njit(fastmath=True, cache=True)
def _tanh_jet(z, nodes, width, out):
    """tanh of the value rows of z (4 nodes, width: value and three derivatives stacked by
    order) and its three derivatives, into out (same shape)."""
    for k in range(nodes):
        for u in range(width):
            z0 = z[k, u]
            z1 = z[nodes + k, u]
            z2 = z[2 * nodes + k, u]
            z3 = z[3 * nodes + k, u]
            y = _tanh(z0)
            s = np.float32(1.0) - y * y
            ys = y * s
            z1z1 = z1 * z1
            out[k, u] = y
            out[nodes + k, u] = s * z1
            out[2 * nodes + k, u] = s * z2 - np.float32(2.0) * ys * z1z1
            cube = (np.float32(6.0) * y * y - np.float32(2.0)) * s * z1z1 * z1
            out[3 * nodes + k, u] = s * z3 - np.float32(6.0) * ys * z1 * z2 + cube


@njit(fastmath=True, cache=True)
def forward(ego, load, ref, prior, wf, meta, out):
    """The network's physical outputs for a batch: out (batch, 5, nodes, 3) in ``POLICY_OUTPUTS``
    order (p, v, a, j, w; float64), as ``StudentNet.forward`` gives them."""
    batch = ego.shape[0]
    history = meta[H_HISTORY]
    residual = meta[H_RESIDUAL] != 0
    width = meta[H_WIDTH]
    n_hidden = meta[H_HIDDEN]
    latent = meta[H_LATENT]
    n_stream = meta[H_STREAM]
    norm = meta[H_NORM]
    nodes = ref.shape[1]
    n_prior = PRIOR_INPUTS
    ref_width = ref.shape[2] + (n_prior if residual else 0)
    ego_n = np.empty((history, ego.shape[2]), dtype=np.float32)
    load_n = np.empty((history, load.shape[2]), dtype=np.float32)
    ref_n = np.empty((nodes, ref_width), dtype=np.float32)
    fused = np.empty((1, 3 * n_stream), dtype=np.float32)
    hidden1 = np.empty((1, latent), dtype=np.float32)
    lat = np.empty((1, latent), dtype=np.float32)
    base = np.empty((1, width), dtype=np.float32)
    k_all = nodes + 1  # the plan's start (tau 0) and the nodes
    z = np.empty((4 * k_all, width), dtype=np.float32)
    jet = np.empty((4 * k_all, width), dtype=np.float32)
    dec = meta[H_DECODER]
    out_w, out_b = meta[dec + 3 + 2 * n_hidden], meta[dec + 4 + 2 * n_hidden]
    tau_off = meta[dec + 5 + 2 * n_hidden]
    mean_off = meta[dec + 6 + 2 * n_hidden]
    std_off = meta[dec + 7 + 2 * n_hidden]
    f = np.empty((4 * k_all, 6), dtype=np.float32)
    for b in range(batch):
        # normalized inputs
        for t in range(history):
            for c in range(ego.shape[2]):
                ego_n[t, c] = ((np.float32(ego[b, t, c]) - wf[meta[norm] + c]) / wf[meta[norm + 1] + c]) * wf[
                    meta[norm + 8] + c
                ]
            for c in range(load.shape[2]):
                load_n[t, c] = (np.float32(load[b, t, c]) - wf[meta[norm + 2] + c]) / wf[meta[norm + 3] + c]
        for k in range(nodes):
            row = nodes - 1 - k  # read from its far end back to now
            for c in range(ref.shape[2]):
                ref_n[row, c] = (np.float32(ref[b, k, c]) - wf[meta[norm + 4] + c]) / wf[meta[norm + 5] + c]
            if residual:
                for c in range(n_prior):
                    ref_n[row, ref.shape[2] + c] = (np.float32(prior[b, k, c]) - wf[meta[norm + 6] + c]) / wf[
                        meta[norm + 7] + c
                    ]
        # encoders and fusion
        fused[0, 0:n_stream] = _stream(ego_n, wf, meta, meta[H_EGO], n_stream)
        fused[0, n_stream : 2 * n_stream] = _stream(load_n, wf, meta, meta[H_LOAD], n_stream)
        fused[0, 2 * n_stream : 3 * n_stream] = _stream(ref_n, wf, meta, meta[H_REF], n_stream)
        fuse = meta[H_FUSE]
        _linear(fused, wf, meta[fuse], meta[fuse + 1], latent, hidden1)
        for j in range(latent):
            hidden1[0, j] = _tanh(hidden1[0, j])
        _linear(hidden1, wf, meta[fuse + 2], meta[fuse + 3], latent, lat)
        for j in range(latent):
            lat[0, j] = _tanh(lat[0, j])
        # decoder: F and its tau-derivatives at tau 0 and the nodes
        _linear(lat, wf, meta[dec], meta[dec + 1], width, base)
        time_weight = meta[dec + 2]
        for k in range(k_all):
            tau = np.float32(0.0) if k == 0 else wf[tau_off + k - 1]
            for u in range(width):
                tw = wf[time_weight + u]
                z[k, u] = base[0, u] + tau * tw
                z[k_all + k, u] = tw
                z[2 * k_all + k, u] = 0.0
                z[3 * k_all + k, u] = 0.0
        _tanh_jet(z, k_all, width, jet)
        for layer in range(n_hidden):
            _linear(jet, wf, meta[dec + 3 + 2 * layer], -1, width, z)
            bias = meta[dec + 4 + 2 * layer]
            for k in range(k_all):
                for u in range(width):
                    z[k, u] += wf[bias + u]
            _tanh_jet(z, k_all, width, jet)
        _linear(jet, wf, out_w, -1, 6, f)
        for k in range(k_all):
            for u in range(6):
                f[k, u] += wf[out_b + u]
        # physical outputs
        for k in range(nodes):
            node = k + 1
            for c in range(3):
                scale = wf[std_off + c]
                out[b, 0, k, c] = scale * (f[node, c] - f[0, c])
                out[b, 1, k, c] = scale * f[k_all + node, c] / np.float32(HORIZON_S)
                out[b, 2, k, c] = scale * f[2 * k_all + node, c] / np.float32(HORIZON_S**2)
                out[b, 3, k, c] = scale * f[3 * k_all + node, c] / np.float32(HORIZON_S**3)
                out[b, 4, k, c] = wf[mean_off + 3 + c] + wf[std_off + 3 + c] * f[node, 3 + c]
                if residual:
                    for m in range(5):
                        out[b, m, k, c] += prior[b, k, 3 * m + c]


class NumbaPolicy:
    """A ``pinn`` student network as a policy callable (numpy in, numpy out), its forward pass
    compiled with numba (one thread, no runtime of its own to pin)."""

    def __init__(self, net: StudentNet):
        self.config = net.config
        self.weights, self.meta = pack(net.eval())
        if net.tau.numel() != N_NODES:
            raise UsageError(f"numba runtime: expected {N_NODES} horizon nodes, got {net.tau.numel()}")
        # compiled (about 7 s) or loaded from numba's cache here, not in a first decision
        history = net.config.history
        self.stacked(
            np.zeros((1, history, EGO_FEATURES)),
            np.zeros((1, history, net.config.load_width)),
            np.zeros((1, N_NODES, REF_FEATURES)),
            np.zeros((1, N_NODES, PRIOR_FEATURES)),
        )

    def __call__(self, ego: np.ndarray, load: np.ndarray, ref: np.ndarray, prior: np.ndarray) -> dict:
        out = self.stacked(ego, load, ref, prior)
        return {name: out[:, m] for m, name in enumerate(POLICY_OUTPUTS)}

    def stacked(self, ego: np.ndarray, load: np.ndarray, ref: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """The outputs as one (batch, 5, nodes, 3) array (p, v, a, j, w)."""
        c = np.ascontiguousarray
        out = np.empty((len(ego), 5, N_NODES, 3))
        forward(c(ego), c(load), c(ref), c(prior), self.weights, self.meta, out)
        return out
