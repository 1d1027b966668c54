"""Presentation: ``replay`` (a run log in 3-D with pyvista, on screen or to a video) and
``plots`` (a run's tracking, tensions and separations as PNG), with their shared ``palette``.

May import: everything in ``cableload_sim`` but ``cli``. Imported by: ``cli`` and the learners'
training summary.
"""
