"""The colours every view of a run shares (plots and replay), as RGB triples in [0, 1].

The quadrotors take matplotlib's tab10 colours in order (red, the fourth, marks nothing else);
the load is an orange no quadrotor uses.
"""

from __future__ import annotations

LOAD_COLOR = (0.949, 0.549, 0.102)
"""The load (#f28c1a)."""
REFERENCE_COLOR = (0.1, 0.1, 0.1)
"""The load reference: near black."""
UAV_COLORS = (
    (0.122, 0.467, 0.706),
    (0.173, 0.627, 0.173),
    (0.580, 0.404, 0.741),
    (0.839, 0.153, 0.157),
    (0.090, 0.745, 0.812),
    (0.549, 0.337, 0.294),
    (0.890, 0.467, 0.761),
    (0.498, 0.498, 0.498),
)
"""Quadrotor i (and its plan) takes ``uav_color(i)``."""


def uav_color(i: int) -> tuple[float, float, float]:
    """The colour of quadrotor ``i`` (0-based), cycling after eight."""
    return UAV_COLORS[i % len(UAV_COLORS)]
