"""One Newton step of a stage-wise optimal control problem with inequality constraints: a
Riccati recursion for the dynamics, a primal-dual interior-point method for the inequalities,
each of them in elastic form (an exact L1 penalty). Numba kernels on flat arrays.

The Newton step of the teacher (Gauss-Newton for the cost, the constraints linearized) solves,
with ``dx_0 = 0`` (the initial state is given), stages ``k = 0..N-1`` and nodes ``j = 1..N``:

    min   sum_j 1/2 dx_j' Q_j dx_j + q_j' dx_j  +  sum_k 1/2 du_k' R_k du_k + r_k' du_k
          + sum_j rho_j' sigma_j  +  sum_k rho_u' sigma_k
    s.t.  dx_{k+1} = A_k dx_k + B_k du_k + d_k
          h_j + H_j dx_j + sigma_j >= 0,    sigma_j >= 0        (path constraints at nodes)
          g_k + G du_k + sigma_k >= 0,      sigma_k >= 0        (input bounds, G diagonal)

Each inequality ``c >= 0`` gets a slack ``s = c + sigma >= 0``, a multiplier ``z`` of
``s >= 0`` and ``w = rho - z`` of ``sigma >= 0``. For ``rho`` larger than the constraint's
multiplier at a solution of the problem with hard constraints, that solution has
``sigma = 0`` and solves this one too (exact penalty); ``z`` stays below ``rho`` by
construction, and a ``z`` close to ``rho`` says that the hard constraints cannot all hold.

The barrier-perturbed optimality conditions ``z s = mu``, ``w sigma = mu`` are linearized. The
slack and the elastic variable are eliminated (``ds``, ``dsigma``), which leaves for each
constraint the term ``1/2 (H dx + e)^2 / D`` with ``D = s/z + sigma/w`` and
``e = h - mu/z + mu/w - D z``: the constraints only add to the stage Hessians and gradients,
and one Riccati sweep solves the whole step. Before each step, ``(s, sigma)`` are set from the
constraint's current value ``c`` to the minimizer of ``rho sigma - mu log s - mu log sigma``
with ``s - sigma = c`` (the slack reset of elastic interior-point methods), so they are always
consistent with the nonlinear constraint. Steps keep ``s, sigma, z, w`` positive
(fraction to the boundary ``tau``).

Matrices from CasADi arrive in its compressed-column layout: one pattern (row indices, column
pointers) per kind of matrix, shared by every stage, and the values of each stage in a row of a
2-D array. The dynamics Jacobians of the load-cable model are sparse (each cable's states
depend only on that cable), which the products with ``A`` and ``B`` exploit; ``P`` is dense.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CACHE = True
SKIP_WEIGHT = 1e-9
"""Constraints whose Hessian weight 1/D is below this (far from active) add only their gradient."""


@njit(cache=CACHE)
def elastic_slacks(c, rho, mu):
    """(s, sigma) with ``s - sigma = c`` minimizing ``rho sigma - mu log s - mu log sigma``."""
    b = rho * c - 2.0 * mu
    root = np.sqrt(b * b + 4.0 * rho * mu * c) if b * b + 4.0 * rho * mu * c > 0.0 else 0.0
    if b > 0.0:
        sigma = 2.0 * mu * c / (b + root)
    else:
        sigma = (root - b) / (2.0 * rho)
    sigma = max(sigma, 1e-300)
    s = max(c + sigma, 1e-300)
    return s, sigma


@njit(cache=CACHE, inline="always")
def _column_product(target, vals, rows, start, stop, X, width):
    """target[:width] = the sum over the nonzeros ``start..stop-1`` of a compressed column of
    ``vals[p] X[rows[p], :width]``, four nonzeros at a time: each pass over the target then
    reads and writes it once for four rows of X (one at a time, the loads and stores of the
    target bound the loop)."""
    for j in range(width):
        target[j] = 0.0
    p = start
    while p + 4 <= stop:
        v0, v1, v2, v3 = vals[p], vals[p + 1], vals[p + 2], vals[p + 3]
        x0, x1, x2, x3 = X[rows[p]], X[rows[p + 1]], X[rows[p + 2]], X[rows[p + 3]]
        for j in range(width):
            target[j] += v0 * x0[j] + v1 * x1[j] + v2 * x2[j] + v3 * x3[j]
        p += 4
    while p < stop:
        v = vals[p]
        x = X[rows[p]]
        for j in range(width):
            target[j] += v * x[j]
        p += 1


@njit(cache=CACHE)
def csc_t_dense(vals, rows, colptr, X, out):
    """out = M' X for M in compressed columns (values ``vals``); X dense (rows of M, m)."""
    m = X.shape[1]
    for c in range(colptr.size - 1):
        _column_product(out[c], vals, rows, colptr[c], colptr[c + 1], X, m)


@njit(cache=CACHE)
def csc_t_dense_lower(vals, rows, colptr, X, out):
    """The lower triangle (columns 0..c of each row c) of out = M' X, for a product known to
    be symmetric (``A' P A``): half the work of ``csc_t_dense``."""
    for c in range(colptr.size - 1):
        _column_product(out[c], vals, rows, colptr[c], colptr[c + 1], X, c + 1)


@njit(cache=CACHE)
def lower_rank_update(Q, rows, coefficients, count, columns, column_count):
    """Q[a, :a+1] += sum_k coefficients[k, a] rows[k, :a+1] for the first ``count`` (1 to 4)
    rows of ``rows`` (4, nx) and each column a in ``columns[:column_count]``: a sum of rank-one
    terms on the lower triangle, four rows in each pass over Q's row (one at a time, the loads
    and stores of Q bound the loop). Rows past ``count`` must be zero."""
    r0, r1, r2, r3 = rows[0], rows[1], rows[2], rows[3]
    for i in range(column_count):
        a = columns[i]
        c0, c1, c2, c3 = coefficients[0, a], coefficients[1, a], coefficients[2, a], coefficients[3, a]
        target = Q[a]
        if count == 1:
            for b in range(a + 1):
                target[b] += c0 * r0[b]
        elif count == 2:
            for b in range(a + 1):
                target[b] += c0 * r0[b] + c1 * r1[b]
        else:
            for b in range(a + 1):
                target[b] += c0 * r0[b] + c1 * r1[b] + c2 * r2[b] + c3 * r3[b]


@njit(cache=CACHE)
def lower_downdate(P, Y, nx):
    """P[a, :a+1] -= (Y[:, :nx]' Y[:, :nx])[a, :a+1]: the lower triangle of a rank-k downdate,
    four rows of Y in each pass over P's row."""
    k = Y.shape[0]
    c = 0
    while c + 4 <= k:
        y0, y1, y2, y3 = Y[c], Y[c + 1], Y[c + 2], Y[c + 3]
        for a in range(nx):
            c0, c1, c2, c3 = y0[a], y1[a], y2[a], y3[a]
            target = P[a]
            for b in range(a + 1):
                target[b] -= c0 * y0[b] + c1 * y1[b] + c2 * y2[b] + c3 * y3[b]
        c += 4
    while c < k:
        yc = Y[c]
        for a in range(nx):
            ya = yc[a]
            target = P[a]
            for b in range(a + 1):
                target[b] -= ya * yc[b]
        c += 1


@njit(cache=CACHE)
def csc_t_vec(vals, rows, colptr, x, out):
    """out = M' x."""
    nc = colptr.size - 1
    for c in range(nc):
        acc = 0.0
        for p in range(colptr[c], colptr[c + 1]):
            acc += vals[p] * x[rows[p]]
        out[c] = acc


@njit(cache=CACHE)
def csc_vec_add(vals, rows, colptr, x, out):
    """out += M x."""
    nc = colptr.size - 1
    for c in range(nc):
        xc = x[c]
        if xc != 0.0:
            for p in range(colptr[c], colptr[c + 1]):
                out[rows[p]] += vals[p] * xc


@njit(cache=CACHE)
def cholesky(M):
    """Lower Cholesky factor of the symmetric positive definite M; ok False otherwise."""
    n = M.shape[0]
    L = np.zeros((n, n))
    for j in range(n):
        acc = M[j, j]
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        if not acc > 0.0:
            return L, False
        L[j, j] = np.sqrt(acc)
        for i in range(j + 1, n):
            acc = M[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
    return L, True


@njit(cache=CACHE)
def forward_substitute(L, Y):
    """Y <- L^-1 Y in place (L lower triangular; Y (n, m))."""
    n, m = Y.shape
    for i in range(n):
        for k in range(i):
            lik = L[i, k]
            for j in range(m):
                Y[i, j] -= lik * Y[k, j]
        inv = 1.0 / L[i, i]
        for j in range(m):
            Y[i, j] *= inv


@njit(cache=CACHE)
def backward_substitute(L, Y):
    """Y <- L'^-1 Y in place."""
    n, m = Y.shape
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            lki = L[k, i]
            for j in range(m):
                Y[i, j] -= lki * Y[k, j]
        inv = 1.0 / L[i, i]
        for j in range(m):
            Y[i, j] *= inv


@njit(cache=CACHE)
def constraint_terms(Q, q, h, Hv, hr_ptr, hr_col, hr_nz, z, rho, mu, D, E, scratch):
    """Add the elastic interior-point terms of one node's constraints to its Hessian ``Q`` and
    gradient ``q``; store each constraint's ``D`` and ``e``. ``H`` is given by its values
    ``Hv`` and a row-wise index (``hr_ptr``, columns ``hr_col``, value positions ``hr_nz``).

    The Hessian terms ``H' diag(1/D) H`` go to the lower triangle four constraints at a time
    (``lower_rank_update``), their rows laid out dense in ``scratch`` (four rows, their
    coefficients, which columns they use and a list of them; all zero between uses) so that
    the inner loop runs over contiguous memory. Only the lower triangle is updated: the caller
    mirrors it. Added one constraint at a time, they took a third of a nine quadrotors' Newton step (117
    constraints of 53 to 97 columns at every node), and through the column indices on both
    sides, 90 %."""
    rows, coefficients, mark, columns = scratch
    count = 0
    column_count = 0
    for r in range(h.size):
        s, sigma = elastic_slacks(h[r], rho[r], mu[r])
        zr = z[r]
        wr = rho[r] - zr
        d = s / zr + sigma / wr
        e = h[r] - mu[r] / zr + mu[r] / wr - d * zr
        D[r] = d
        E[r] = e
        weight = 1.0 / d
        start, stop = hr_ptr[r], hr_ptr[r + 1]
        for a in range(start, stop):
            q[hr_col[a]] += Hv[hr_nz[a]] * weight * e
        if weight > SKIP_WEIGHT:
            row = rows[count]
            coefficient = coefficients[count]
            for a in range(start, stop):
                col = hr_col[a]
                value = Hv[hr_nz[a]]
                row[col] = value
                coefficient[col] = weight * value
                if not mark[col]:
                    mark[col] = True
                    columns[column_count] = col
                    column_count += 1
            count += 1
            if count == 4:
                lower_rank_update(Q, rows, coefficients, count, columns, column_count)
                _clear_scratch(scratch, column_count)
                count = 0
                column_count = 0
    if count > 0:
        lower_rank_update(Q, rows, coefficients, count, columns, column_count)
        _clear_scratch(scratch, column_count)


@njit(cache=CACHE)
def _clear_scratch(scratch, column_count):
    rows, coefficients, mark, columns = scratch
    for i in range(column_count):
        col = columns[i]
        for k in range(4):
            rows[k, col] = 0.0
            coefficients[k, col] = 0.0
        mark[col] = False


@njit(cache=CACHE)
def _fraction_to_boundary(value, step, tau, alpha):
    if step < 0.0:
        limit = -tau * value / step
        if limit < alpha:
            return limit
    return alpha


@njit(cache=CACHE)
def dual_update(h, Hdx, z, rho, mu, D, tau, dz, alpha_p, alpha_d):
    """Multiplier steps ``dz`` of one node's constraints, and the step lengths that keep the
    slacks (primal) and multipliers (dual) positive."""
    for r in range(h.size):
        s, sigma = elastic_slacks(h[r], rho[r], mu[r])
        zr = z[r]
        wr = rho[r] - zr
        dzr = -(Hdx[r] + h[r] - mu[r] / zr + mu[r] / wr) / D[r]
        dz[r] = dzr
        ds = mu[r] / zr - s - (s / zr) * dzr
        dsigma = mu[r] / wr - sigma + (sigma / wr) * dzr
        alpha_p = _fraction_to_boundary(s, ds, tau, alpha_p)
        alpha_p = _fraction_to_boundary(sigma, dsigma, tau, alpha_p)
        alpha_d = _fraction_to_boundary(zr, dzr, tau, alpha_d)
        alpha_d = _fraction_to_boundary(wr, -dzr, tau, alpha_d)
    return alpha_p, alpha_d


@njit(cache=CACHE)
def _node_qp(
    j, P, p, q, Qv, Q_rows, Q_ptr, h, Hv, hr_ptr, hr_col, hr_nz, z, rho, mu, Dn, En, regularization, scratch
):
    """P, p <- Hessian and gradient of node j: cost, regularization, constraint terms. Only
    P's lower triangle is whole (``constraint_terms``)."""
    nx = p.size
    for a in range(nx):
        for b in range(nx):
            P[a, b] = 0.0
        P[a, a] = regularization
        p[a] = q[j - 1, a]
    for c in range(nx):
        for idx in range(Q_ptr[c], Q_ptr[c + 1]):
            P[Q_rows[idx], c] += Qv[j - 1, idx]
    constraint_terms(
        P,
        p,
        h[j - 1],
        Hv[j - 1],
        hr_ptr,
        hr_col,
        hr_nz,
        z[j - 1],
        rho[j - 1],
        mu[j - 1],
        Dn[j - 1],
        En[j - 1],
        scratch,
    )


@njit(cache=CACHE)
def newton_step(
    d,
    Av,
    A_rows,
    A_ptr,
    Bv,
    B_rows,
    B_ptr,
    Qv,
    Q_rows,
    Q_ptr,
    q,
    R,
    r,
    h,
    Hv,
    hr_ptr,
    hr_col,
    hr_nz,
    z,
    rho,
    mu,
    u,
    u_max,
    zu,
    rho_u,
    mu_u,
    regularization,
    tau,
):
    """The Newton direction and step bounds of the problem in the module docstring.

    d (N, nx): defects; Av, Bv (N, nnz): dynamics Jacobians; Qv (N, nnz), q (N, nx): node
    Hessians and gradients (nodes 1..N, weights included); R, r (N, nu): diagonal input
    Hessians and gradients; h (N, m), Hv (N, nnz), z (N, m), rho and mu (N, m): path
    constraints at the nodes; u (N, nu), u_max (nu,), zu (N, 2 nu), rho_u and mu_u (N,): input
    bounds ``|u| <= u_max``, rows (lower, upper) per input.

    Returns dX (N+1, nx) with dX[0] = 0, dU (N, nu), dz (N, m), dzu (N, 2 nu), the largest
    primal and dual step lengths in (0, 1], and whether the step is usable.
    """
    N, nx = d.shape
    nu = R.shape[1]
    m = h.shape[1]
    dX = np.zeros((N + 1, nx))
    dU = np.zeros((N, nu))
    dz = np.zeros((N, m))
    dzu = np.zeros((N, 2 * nu))
    Dn = np.empty((N, m))
    En = np.empty((N, m))
    Du = np.empty((N, 2 * nu))
    Ru = np.empty((N, nu))
    ru = np.empty((N, nu))
    # input Hessians and gradients with the bounds' terms
    for k in range(N):
        for i in range(nu):
            Ru[k, i] = R[k, i] + regularization
            ru[k, i] = r[k, i]
            scale = 1.0 / u_max[i]
            for side in range(2):
                sign = 1.0 if side == 0 else -1.0  # lower: 1 + u/umax >= 0, upper: 1 - u/umax
                c = 1.0 + sign * u[k, i] * scale
                s, sigma = elastic_slacks(c, rho_u[k], mu_u[k])
                zr = zu[k, 2 * i + side]
                wr = rho_u[k] - zr
                dd = s / zr + sigma / wr
                e = c - mu_u[k] / zr + mu_u[k] / wr - dd * zr
                Du[k, 2 * i + side] = dd
                g = sign * scale
                Ru[k, i] += g * g / dd
                ru[k, i] += g * e / dd
    # backward Riccati sweep
    K = np.empty((N, nu, nx))
    kff = np.empty((N, nu))
    P = np.zeros((nx, nx))
    p = np.zeros(nx)
    Pdp = np.empty(nx)
    BtP = np.empty((nu, nx))
    AtP = np.empty((nx, nx))
    PA = np.empty((nx, nx))
    S = np.empty((nx, nx))
    Y = np.empty((nu, nx + 1))
    tmp = np.empty(nx)

    scratch = (  # constraint_terms'
        np.zeros((4, nx)),
        np.zeros((4, nx)),
        np.zeros(nx, dtype=np.bool_),
        np.zeros(nx, dtype=np.int64),
    )
    _node_qp(
        N,
        P,
        p,
        q,
        Qv,
        Q_rows,
        Q_ptr,
        h,
        Hv,
        hr_ptr,
        hr_col,
        hr_nz,
        z,
        rho,
        mu,
        Dn,
        En,
        regularization,
        scratch,
    )
    for a in range(nx):
        for b in range(a):
            P[b, a] = P[a, b]
    for k in range(N - 1, -1, -1):
        # P, p: cost-to-go at node k+1
        for a in range(nx):
            acc = p[a]
            for b in range(nx):
                acc += P[a, b] * d[k, b]
            Pdp[a] = acc
        csc_t_dense(Bv[k], B_rows, B_ptr, P, BtP)
        Huu = np.zeros((nu, nu))
        for c in range(nu):  # Huu[:, c] = (B'P) B[:, c]
            for idx in range(B_ptr[c], B_ptr[c + 1]):
                v = Bv[k, idx]
                row = B_rows[idx]
                for a in range(nu):
                    Huu[a, c] += BtP[a, row] * v
        for a in range(nu):
            Huu[a, a] += Ru[k, a]
        csc_t_vec(Bv[k], B_rows, B_ptr, Pdp, Y[:, nx])
        for a in range(nu):
            Y[a, nx] += ru[k, a]
        L, ok = cholesky(Huu)
        if not ok:
            return dX, dU, dz, dzu, 0.0, 0.0, False
        if k == 0:
            col = Y[:, nx:]
            forward_substitute(L, col)
            backward_substitute(L, col)
            for a in range(nu):
                kff[0, a] = -col[a, 0]
                for b in range(nx):
                    K[0, a, b] = 0.0
            break
        csc_t_dense(Av[k], A_rows, A_ptr, P, AtP)  # A'P
        for a in range(nx):
            for b in range(nx):
                PA[a, b] = AtP[b, a]
        csc_t_dense_lower(Av[k], A_rows, A_ptr, PA, S)  # A'PA, symmetric: its lower triangle
        csc_t_dense(Bv[k], B_rows, B_ptr, PA, Y[:, :nx])  # Hux = B'PA
        forward_substitute(L, Y)  # L^-1 [Hux, hu]
        csc_t_vec(Av[k], A_rows, A_ptr, Pdp, tmp)  # A'(P d + p)
        _node_qp(
            k,
            P,
            p,
            q,
            Qv,
            Q_rows,
            Q_ptr,
            h,
            Hv,
            hr_ptr,
            hr_col,
            hr_nz,
            z,
            rho,
            mu,
            Dn,
            En,
            regularization,
            scratch,
        )
        for a in range(nx):
            p[a] += tmp[a]
            for c in range(nu):
                p[a] -= Y[c, a] * Y[c, nx]
            for b in range(a + 1):
                P[a, b] += S[a, b]
        # the rank-nu update -Y'Y, lower triangle, four rows of Y in each pass over P's rows
        # (through Y's columns, strided, it took 40 % of a nine quadrotors' Newton step)
        lower_downdate(P, Y, nx)
        for a in range(nx):
            for b in range(a):
                P[b, a] = P[a, b]
        backward_substitute(L, Y)
        for a in range(nu):
            kff[k, a] = -Y[a, nx]
            for b in range(nx):
                K[k, a, b] = -Y[a, b]
    # forward rollout
    for k in range(N):
        for a in range(nu):
            acc = kff[k, a]
            for b in range(nx):
                acc += K[k, a, b] * dX[k, b]
            dU[k, a] = acc
        for a in range(nx):
            dX[k + 1, a] = d[k, a]
        csc_vec_add(Av[k], A_rows, A_ptr, dX[k], dX[k + 1])
        csc_vec_add(Bv[k], B_rows, B_ptr, dU[k], dX[k + 1])
    # multipliers and step lengths
    alpha_p = 1.0
    alpha_d = 1.0
    Hdx = np.empty(m)
    for j in range(1, N + 1):
        for row in range(m):
            acc = 0.0
            for a in range(hr_ptr[row], hr_ptr[row + 1]):
                acc += Hv[j - 1, hr_nz[a]] * dX[j, hr_col[a]]
            Hdx[row] = acc
        alpha_p, alpha_d = dual_update(
            h[j - 1], Hdx, z[j - 1], rho[j - 1], mu[j - 1], Dn[j - 1], tau, dz[j - 1], alpha_p, alpha_d
        )
    for k in range(N):
        for i in range(nu):
            scale = 1.0 / u_max[i]
            for side in range(2):
                sign = 1.0 if side == 0 else -1.0
                c = 1.0 + sign * u[k, i] * scale
                s, sigma = elastic_slacks(c, rho_u[k], mu_u[k])
                zr = zu[k, 2 * i + side]
                wr = rho_u[k] - zr
                dzr = -(sign * scale * dU[k, i] + c - mu_u[k] / zr + mu_u[k] / wr) / Du[k, 2 * i + side]
                dzu[k, 2 * i + side] = dzr
                ds = mu_u[k] / zr - s - (s / zr) * dzr
                dsigma = mu_u[k] / wr - sigma + (sigma / wr) * dzr
                alpha_p = _fraction_to_boundary(s, ds, tau, alpha_p)
                alpha_p = _fraction_to_boundary(sigma, dsigma, tau, alpha_p)
                alpha_d = _fraction_to_boundary(zr, dzr, tau, alpha_d)
                alpha_d = _fraction_to_boundary(wr, -dzr, tau, alpha_d)
    return dX, dU, dz, dzu, alpha_p, alpha_d, True
