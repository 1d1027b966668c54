"""Flights on real quadrotors: the hardware backend, the safety module and the operator's
station (being built).

May import: ``cableload_sim``, ``planners``, ``backends``, ``learners``. Imported by:
``cableload_sim.cli``.
"""
