"""Flights on real quadrotors (and the safety module every backend uses).

- ``safety``: the rules between every planner and every quadrotor, pure functions of the state
  and the plans, and the module that applies them (it sits below the backends: the episode
  runner of every backend uses it);
- ``flight``: the flight file (quadrotors, bodies, slots, arena, limits), checked;
- ``mocap``: a motion-capture body's pose stream filtered into pose and twist;
- ``backend``: the hardware backend over agiros pilots and motion capture, on the wall clock;
- ``operator``: the operator's inputs (gamepad, keyboard, script) and the dead-man switch;
- ``preflight``: the checks before a flight; ``fly``: the station that flies one.

May import: ``cableload_sim``, ``planners``, ``backends``, ``learners`` (``safety``:
``cableload_sim`` only). Imported by: ``cableload_sim.cli``; ``safety`` also by ``backends``.
"""
