"""The shipped configurations (``paper.toml``: the paper's setup), read as package data by
``cableload_sim.params.load_config``.

May import: nothing. Imported by: nothing (read as data).
"""
