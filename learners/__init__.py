"""Learning the student: its network (``network``: TCN encoders, physics-informed decoder), the
training configuration and reference distribution (``config``, ``distribution``), DAgger
(``dagger``: collection on a process pool or Ray, training, resume), the dataset store
(``store``) and the exported policies (``export``, ``policies/``).

May import: ``cableload_sim``, ``planners``, ``backends``. Imported by: ``cableload_sim.cli``,
``hw``, and ``planners.make_planner("student")`` by name at run time.
"""
