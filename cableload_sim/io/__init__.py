"""What the project writes and reads: run logs (``runlog``: ROS1 bags, their writer, reader
and message definitions), atomic file writes (``files``) and the machine's free memory and
disk (``resources``).

May import: ``cableload_sim.errors``, ``checks``, ``rotations``, ``horizon``, ``params``,
``physics``, ``metrics``. Imported by: ``viz``, ``cli`` and the planners, learners and
backends.
"""
