"""The planning horizon: the paper's non-uniform grid of 21 node times (equation 12).

``t_0 = t``, ``t_j = t_{j-1} + 0.01 + 0.009 (j - 1)`` for j = 1..20, i.e. about 1.9 s ahead,
dense near the present and coarse at the end. Teacher, student and formation planners all
produce trajectories on these nodes.
"""

from __future__ import annotations

import numpy as np

N_NODES = 21
"""Number of nodes of a plan, the current time included."""

FIRST_STEP_S = 0.01
"""First node spacing (s)."""

STEP_GROWTH_S = 0.009
"""Increase of the node spacing from one interval to the next (s)."""


def node_offsets(n_nodes: int = N_NODES) -> np.ndarray:
    """Node times relative to the plan's start (s), shape (n_nodes,), first entry 0."""
    if n_nodes < 2:
        raise ValueError(f"a horizon needs at least 2 nodes, got n_nodes={n_nodes}")
    steps = FIRST_STEP_S + STEP_GROWTH_S * np.arange(n_nodes - 1)
    return np.concatenate([[0.0], np.cumsum(steps)])


_OFFSETS = node_offsets(N_NODES)
_OFFSETS.flags.writeable = False

HORIZON_S = float(_OFFSETS[-1])
"""How far ahead of its time (s) a plan of ``N_NODES`` nodes reaches."""


def node_times(t: float, n_nodes: int = N_NODES) -> np.ndarray:
    """Absolute node times (s) of a plan made at time ``t``."""
    return float(t) + (_OFFSETS if n_nodes == N_NODES else node_offsets(n_nodes))
