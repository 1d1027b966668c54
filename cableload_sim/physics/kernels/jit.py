"""How every kernel is compiled, and the small helpers all stages share.

Compilation: ``njit`` with the fast-math flags below and numba's on-disk cache, keyed on the
sources of the whole ``kernels`` package and ``layout``. numba keys a function's cache on its own
file only, so a kernel calling into another module (every stage here calls ``jit`` helpers,
and all read ``layout``'s indices, compiled in as literals) would keep running stale machine
code after that module changed; ``_PackageStamp`` makes any change to any of these files a
cache miss for every kernel.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba import njit
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    InTreeCacheLocator,
    UserProvidedCacheLocator,
    UserWideCacheLocator,
)

from cableload_sim.physics import layout

CACHE = True
# Fast-math without the no-NaN/no-Inf assumptions (non-finite values must stay detectable) and
# without contraction into FMA or reassociation, whose choices depend on inlining context and
# would make results depend on what else a process compiled first.
FASTMATH = {"nsz", "arcp", "afn"}

_SOURCES = (*sorted(Path(__file__).parent.glob("*.py")), Path(layout.__file__))


@functools.lru_cache(maxsize=1)
def _sources_digest() -> bytes:
    digest = hashlib.sha256()
    for path in _SOURCES:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.digest()


class _PackageStamp:
    """Cache locator mixin: a compiled kernel is fresh while no kernel source and no layout
    index changed."""

    def get_source_stamp(self):
        return _sources_digest()


class _UserProvided(_PackageStamp, UserProvidedCacheLocator):
    pass


class _InTree(_PackageStamp, InTreeCacheLocator):
    pass


class _UserWide(_PackageStamp, UserWideCacheLocator):
    pass


class _KernelCacheImpl(CompileResultCacheImpl):
    _locator_classes = [_UserProvided, _InTree, _UserWide]


class _KernelCache(FunctionCache):
    _impl_class = _KernelCacheImpl


def kernel(**options):
    """``njit`` with the kernels' fast-math flags and error model, cached on the package's
    sources (``options``: e.g. ``inline="always"``, ``parallel=True``)."""

    def compile_(function):
        dispatcher = njit(fastmath=FASTMATH, error_model="numpy", **options)(function)
        if CACHE:
            # what Dispatcher.enable_caching does, with the package-wide stamp (numba 0.68)
            dispatcher._cache = _KernelCache(dispatcher.py_func)
        return dispatcher

    return compile_


# ---------------------------------------------------------------------------------------------
# Indices: layout's own functions, compiled in


body_offset = kernel(inline="always")(layout.body_offset)
quad_offset = kernel(inline="always")(layout.quad_offset)
quad_model_offset = kernel(inline="always")(layout.quad_model_offset)
cable_model_offset = kernel(inline="always")(layout.cable_model_offset)


@kernel(inline="always")
def quat_product(aw, ax, ay, az, bw, bx, by, bz):
    """The Hamilton product a (x) b of two quaternions (w, x, y, z) given by their components."""
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


@kernel()
def quat_to_rot(x, k, R, b):
    """Write the rotation matrix of the quaternion x[k:k+4] into R[b, 0:9] (row-major)."""
    w = x[k]
    qx = x[k + 1]
    qy = x[k + 2]
    qz = x[k + 3]
    s = 2.0 / (w * w + qx * qx + qy * qy + qz * qz)
    R[b, 0] = 1.0 - s * (qy * qy + qz * qz)
    R[b, 1] = s * (qx * qy - w * qz)
    R[b, 2] = s * (qx * qz + w * qy)
    R[b, 3] = s * (qx * qy + w * qz)
    R[b, 4] = 1.0 - s * (qx * qx + qz * qz)
    R[b, 5] = s * (qy * qz - w * qx)
    R[b, 6] = s * (qx * qz - w * qy)
    R[b, 7] = s * (qy * qz + w * qx)
    R[b, 8] = 1.0 - s * (qx * qx + qy * qy)
