"""The physical model and its simulation.

``layout`` is the only place that knows the flat arrays' layout; ``kernels`` are the numba
physics and onboard controllers; ``simulator.Simulator`` owns the arrays and steps them;
``statics`` (hover equilibria), ``ground``, ``wind``, ``sensing`` (motion capture and the
planners' filters), ``link`` (plans lost or late), ``disturbances`` and ``feasibility`` (can
the configured system fly a reference) model what surrounds the kernels; ``world`` is the
state a planner sees.

May import: ``cableload_sim.errors``, ``checks``, ``rotations``, ``horizon``, ``params``,
``trajectories``. Imported by: ``metrics``, ``io``, ``viz``, ``cli`` and the planners,
learners and backends.
"""
