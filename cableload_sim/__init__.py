"""cableload's simulator and what every other part of the project builds on.

Subpackages, lowest layer first; each may import the ones above it in this list, never those
below, and nothing here imports ``planners``, ``learners``, ``backends`` or ``hw`` except the
reproduction (``reproduce``) and the command line (``cli``), the top of the whole project:

- ``errors``, ``checks``, ``rotations``, ``horizon``: the error types, the one family of value
  checks and the bounded file reader, quaternion algebra, the plan's time grid;
- ``params``: the configuration (one module per part of the system, each validating its own
  table);
- ``trajectories``: load references by family (analytic curves, race tracks, pose to pose,
  random draws, the lift from the ground);
- ``physics``: the state layout, the numba kernels, the simulator and what it models around
  the kernels (ground, wind, sensing, the link, disturbances, the feasibility checks);
- ``metrics``: tracking errors and the figures of a run;
- ``io``: run logs (ROS1 bags) and their messages, atomic file writes, the machine's resources;
- ``viz``: replay and plots;
- ``reproduce``: the paper's tables beside ours (the paper's values as data files, and the
  runs that reproduce them, which fly the planners and train the students);
- ``cli``: the ``cableload`` command, its benchmarks and the generated reference pages.

``tests/test_layers.py`` checks these rules on every module.
"""
