"""The reproduction of the paper's tables: the paper's values (``paper``: its tables and the times
its text states, transcribed into the TOML files of ``paper/``), to be put beside ours.

May import: ``cableload_sim.errors``, ``cableload_sim.checks``. Imported by: nothing yet (the
``cableload reproduce`` command will).
"""
