"""The teacher's Newton step (``planners.riccati_ipm``) against a plain NumPy twin that builds
the whole KKT system of the step and solves it densely, and the elastic interior-point pieces
against their definitions. Small random problems with the sparsity of a real one: nothing is
compiled but the numba kernels."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from planners.riccati_ipm import (
    csc_t_dense,
    csc_t_dense_lower,
    elastic_slacks,
    lower_downdate,
    lower_rank_update,
    newton_step,
)

REG = 1e-6
TAU = 0.99


def random_csc(rng, rows, cols, density):
    """A random sparse matrix's compressed-column pattern and values of N stages."""
    mask = rng.random((rows, cols)) < density
    pattern = sp.csc_matrix(mask.astype(float))
    pattern.sort_indices()
    return pattern.indices.astype(np.int64), pattern.indptr.astype(np.int64), pattern.nnz


def dense(vals, rows, ptr, shape):
    return sp.csc_matrix((vals, rows, ptr), shape=shape).toarray()


def row_index(rows, ptr, m):
    cols = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    order = np.lexsort((cols, rows))
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
    return row_ptr.astype(np.int64), cols[order].astype(np.int64), order.astype(np.int64)


def twin_step(d, A, B, Q, q, R, r, h, H, z, rho, mu, u, u_max, zu, rho_u, mu_u):
    """The same Newton step from its definition: slacks reset from the constraint values, the
    barrier-perturbed KKT system linearized, slacks and elastic variables eliminated, the
    equality-constrained QP solved as one dense linear system."""
    N, nx = d.shape
    nu = R.shape[1]

    def terms(c, zz, rr, mm):
        s, sigma = np.vectorize(elastic_slacks)(c, rr, mm)
        w = rr - zz
        D = s / zz + sigma / w
        e = c - mm / zz + mm / w - D * zz
        return s, sigma, w, D, e

    nv = N * (nu + nx)
    iu = [k * (nu + nx) + np.arange(nu) for k in range(N)]  # du_k
    ix = [None] + [(j - 1) * (nu + nx) + nu + np.arange(nx) for j in range(1, N + 1)]  # dx_j
    Hess = np.zeros((nv, nv))
    grad = np.zeros(nv)
    Ceq = np.zeros((N * nx, nv))
    ceq = np.zeros(N * nx)
    node = []
    for j in range(1, N + 1):
        s, sigma, w, D, e = terms(h[j - 1], z[j - 1], rho[j - 1], mu[j - 1])
        node.append((s, sigma, w, D))
        Hj = H[j - 1]
        Hess[np.ix_(ix[j], ix[j])] += Q[j - 1] + REG * np.eye(nx) + Hj.T @ (Hj / D[:, None])
        grad[ix[j]] += q[j - 1] + Hj.T @ (e / D)
    inputs = []
    for k in range(N):
        c = np.column_stack([1.0 + u[k] / u_max, 1.0 - u[k] / u_max]).ravel()
        G = np.zeros((2 * nu, nu))
        G[0::2] = np.diag(1.0 / u_max)
        G[1::2] = -np.diag(1.0 / u_max)
        s, sigma, w, D, e = terms(c, zu[k], np.full(2 * nu, rho_u[k]), np.full(2 * nu, mu_u[k]))
        inputs.append((c, G, s, sigma, w, D))
        Hess[np.ix_(iu[k], iu[k])] += np.diag(R[k] + REG) + G.T @ (G / D[:, None])
        grad[iu[k]] += r[k] + G.T @ (e / D)
        rows = slice(k * nx, (k + 1) * nx)
        Ceq[rows, ix[k + 1]] = np.eye(nx)
        Ceq[rows, iu[k]] = -B[k]
        if k > 0:
            Ceq[rows, ix[k]] = -A[k]
        ceq[rows] = d[k]
    kkt = np.block([[Hess, Ceq.T], [Ceq, np.zeros((N * nx, N * nx))]])
    sol = np.linalg.solve(kkt, np.concatenate([-grad, ceq]))
    dX = np.zeros((N + 1, nx))
    dU = np.array([sol[iu[k]] for k in range(N)])
    for j in range(1, N + 1):
        dX[j] = sol[ix[j]]
    alpha_p = alpha_d = 1.0

    def ftb(value, step, alpha):
        neg = step < 0
        return min(alpha, (-TAU * value[neg] / step[neg]).min()) if neg.any() else alpha

    dz = np.zeros_like(h)
    for j in range(1, N + 1):
        s, sigma, w, D = node[j - 1]
        zz, mm = z[j - 1], mu[j - 1]
        dz[j - 1] = -(H[j - 1] @ dX[j] + h[j - 1] - mm / zz + mm / w) / D
        ds = mm / zz - s - s / zz * dz[j - 1]
        dsig = mm / w - sigma + sigma / w * dz[j - 1]
        alpha_p = ftb(sigma, dsig, ftb(s, ds, alpha_p))
        alpha_d = ftb(w, -dz[j - 1], ftb(zz, dz[j - 1], alpha_d))
    dzu = np.zeros_like(zu)
    for k in range(N):
        c, G, s, sigma, w, D = inputs[k]
        dzu[k] = -(G @ dU[k] + c - mu_u[k] / zu[k] + mu_u[k] / w) / D
        ds = mu_u[k] / zu[k] - s - s / zu[k] * dzu[k]
        dsig = mu_u[k] / w - sigma + sigma / w * dzu[k]
        alpha_p = ftb(sigma, dsig, ftb(s, ds, alpha_p))
        alpha_d = ftb(w, -dzu[k], ftb(zu[k], dzu[k], alpha_d))
    return dX, dU, dz, dzu, alpha_p, alpha_d


def random_problem(rng, N=5, nx=9, nu=3, m=4):
    A_rows, A_ptr, A_nnz = random_csc(rng, nx, nx, 0.4)
    B_rows, B_ptr, B_nnz = random_csc(rng, nx, nu, 0.5)
    Q_rows, Q_ptr, Q_nnz = random_csc(rng, nx, nx, 1.0)
    H_rows, H_ptr, H_nnz = random_csc(rng, m, nx, 0.5)
    Av = rng.normal(scale=0.3, size=(N, A_nnz))
    A = np.array([dense(Av[k], A_rows, A_ptr, (nx, nx)) + 0.0 for k in range(N)])
    Bv = rng.normal(size=(N, B_nnz))
    B = np.array([dense(Bv[k], B_rows, B_ptr, (nx, nu)) for k in range(N)])
    Jr = rng.normal(size=(N, nx + 2, nx))
    Q = np.einsum("kri,krj->kij", Jr, Jr) * 0.1
    Qv = np.array([Q[k][Q_rows, np.repeat(np.arange(nx), np.diff(Q_ptr))] for k in range(N)])
    Hv = rng.normal(size=(N, H_nnz))
    H = np.array([dense(Hv[k], H_rows, H_ptr, (m, nx)) for k in range(N)])
    h = rng.normal(scale=0.5, size=(N, m))  # some violated, some not
    rho = np.full((N, m), 50.0)
    mu = np.full((N, m), 1e-2)
    z = rng.uniform(0.01, 40.0, size=(N, m))
    u_max = rng.uniform(1.0, 3.0, size=nu)
    u = rng.uniform(-1.2, 1.2, size=(N, nu)) * u_max
    zu = rng.uniform(0.01, 10.0, size=(N, 2 * nu))
    rho_u = np.full(N, 20.0)
    mu_u = np.full(N, 1e-2)
    hr = row_index(H_rows, H_ptr, m)
    args = dict(
        d=rng.normal(size=(N, nx)),
        q=rng.normal(size=(N, nx)),
        R=rng.uniform(0.1, 1.0, size=(N, nu)),
        r=rng.normal(size=(N, nu)),
        h=h,
        z=z,
        rho=rho,
        mu=mu,
        u=u,
        u_max=u_max,
        zu=zu,
        rho_u=rho_u,
        mu_u=mu_u,
    )
    kernel = (
        args["d"],
        Av,
        A_rows,
        A_ptr,
        Bv,
        B_rows,
        B_ptr,
        Qv,
        Q_rows,
        Q_ptr,
        args["q"],
        args["R"],
        args["r"],
        h,
        Hv,
        *hr,
        z,
        rho,
        mu,
        u,
        u_max,
        zu,
        rho_u,
        mu_u,
        REG,
        TAU,
    )
    twin = (args["d"], A, B, Q, args["q"], args["R"], args["r"], h, H, z, rho, mu, u, u_max, zu, rho_u, mu_u)
    return kernel, twin


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newton_step_equals_the_dense_kkt_solution(seed):
    kernel, twin = random_problem(np.random.default_rng(seed))
    dX, dU, dz, dzu, alpha_p, alpha_d, ok = newton_step(*kernel)
    assert ok
    tX, tU, tz, tzu, tp, td = twin_step(*twin)
    np.testing.assert_allclose(dX, tX, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(dU, tU, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(dz, tz, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dzu, tzu, rtol=1e-6, atol=1e-9)
    assert alpha_p == pytest.approx(tp, rel=1e-6) and alpha_d == pytest.approx(td, rel=1e-6)
    assert 0.0 < alpha_p <= 1.0 and 0.0 < alpha_d <= 1.0


@pytest.mark.parametrize("c", [-2.0, -1e-3, 0.0, 1e-4, 0.3, 50.0])
def test_elastic_slacks_minimize_the_barrier_penalty(c):
    """s - sigma = c, both positive, and rho = mu/s + mu/sigma (stationary: a minimum, the
    function being convex); a violated constraint (c < 0) is absorbed by sigma ~ -c."""
    rho, mu = 100.0, 1e-3
    s, sigma = elastic_slacks(c, rho, mu)
    assert s > 0.0 and sigma > 0.0
    assert s - sigma == pytest.approx(c, abs=1e-12)
    assert mu / s + mu / sigma == pytest.approx(rho, rel=1e-9)
    if c < -1e-3:
        assert sigma == pytest.approx(-c, rel=1e-3)
    if c > 0.1:
        assert sigma < 1e-4


@pytest.mark.parametrize("density", [0.05, 0.3, 1.0])
def test_blocked_kernels_equal_their_numpy_products(density):
    """The sweep's kernels, which add up to four rows per pass (and one at a time for the
    rest), give the products they stand for: M'X and the lower triangle of M'X for sparse M
    (columns of 0 to 13 nonzeros, so every remainder occurs), the lower triangle of a rank-k
    downdate for k of 1 to 9, and the lower triangle of a sum of weighted rank-one terms over
    a subset of its columns, the rows past ``count`` zero."""
    rng = np.random.default_rng(int(density * 100))
    n = 13
    rows, ptr, nnz = random_csc(rng, n, n, density)
    vals = rng.normal(size=nnz)
    M = dense(vals, rows, ptr, (n, n))
    X = rng.normal(size=(n, 7))
    out = np.full((n, 7), np.nan)
    csc_t_dense(vals, rows, ptr, X, out)
    np.testing.assert_allclose(out, M.T @ X, atol=1e-12)
    P = rng.normal(size=(n, n))
    P = P + P.T
    lower = np.full((n, n), np.nan)
    csc_t_dense_lower(vals, rows, ptr, P @ M, lower)
    expected = M.T @ P @ M
    for a in range(n):
        np.testing.assert_allclose(lower[a, : a + 1], expected[a, : a + 1], atol=1e-11)
    for k in range(1, 10):
        Y = rng.normal(size=(k, n + 1))
        target = P.copy()
        lower_downdate(target, Y, n)
        want = P - Y[:, :n].T @ Y[:, :n]
        for a in range(n):
            np.testing.assert_allclose(target[a, : a + 1], want[a, : a + 1], atol=1e-12)
            np.testing.assert_array_equal(target[a, a + 1 :], P[a, a + 1 :])
    columns = np.array([0, 3, 4, 9, 12], dtype=np.int64)
    for count in range(1, 5):
        dense_rows = np.zeros((4, n))
        coefficients = np.zeros((4, n))
        dense_rows[:count] = rng.normal(size=(count, n))
        coefficients[:count] = rng.normal(size=(count, n))
        target = P.copy()
        lower_rank_update(target, dense_rows, coefficients, count, columns, columns.size)
        want = P.copy()
        for c in range(count):
            want += np.outer(coefficients[c], dense_rows[c])
        for a in range(n):
            if a in columns:
                np.testing.assert_allclose(target[a, : a + 1], want[a, : a + 1], atol=1e-12)
            else:
                np.testing.assert_array_equal(target[a], P[a])
