"""A private ROS graph: its own master on a free port and processes in their own process
groups, all stopped together (tests, benchmarks, scripted experiments).

``ROS_HOSTNAME=127.0.0.1`` and a ``ROS_HOME`` inside the given folder keep it off the machine's
network and out of the user's files; each process's output goes to ``<folder>/<name>.log``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

from backends.ros1 import DEBIAN_PACKAGES, RosUnavailable, ros_available

CLI = [sys.executable, "-m", "cableload_sim.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _default_interrupt() -> None:
    """In the child before it runs: SIGINT back to its default. A process started in the
    background of a shell without job control inherits SIGINT ignored, and Python then never
    raises KeyboardInterrupt: a test's Ctrl-C would not reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class RosGraph:
    """A master and the processes started against it."""

    def __init__(self, folder: Path):
        ok, why = ros_available()
        if not ok:
            raise RosUnavailable(why)
        if shutil.which("rosmaster") is None:
            raise RosUnavailable(f"needs rosmaster: sudo apt-get install {' '.join(DEBIAN_PACKAGES)}")
        self.folder = folder
        self.port = free_port()
        home = folder / "ros_home"
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "ROS_MASTER_URI": f"http://127.0.0.1:{self.port}",
            "ROS_HOSTNAME": "127.0.0.1",
            "ROS_HOME": str(home),
            "ROS_LOG_DIR": str(home / "log"),
            "PYTHONUNBUFFERED": "1",
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self.master = self.start("master", ["rosmaster", "--core", "-p", str(self.port)])
        deadline = time.monotonic() + 10.0
        while not port_open(self.port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rosmaster did not start: {self.log('master')}")
            time.sleep(0.05)

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        out = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 - closed by the process
        proc = subprocess.Popen(
            command,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.folder,
            preexec_fn=_default_interrupt,
        )
        self.processes[name] = proc
        return proc

    def cableload(self, name: str, *args: str) -> subprocess.Popen:
        return self.start(name, [*CLI, *args])

    def run(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
        """A ``cableload`` command to its end, in the foreground."""
        return subprocess.run(
            [*CLI, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.folder
        )

    def log(self, name: str, tail: int | None = 4000) -> str:
        """What process ``name`` printed: its last ``tail`` characters (None: all)."""
        path = self.folder / f"{name}.log"
        if not path.exists():
            return ""
        text = path.read_text()
        return text if tail is None else text[-tail:]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.processes[name]
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    def master_state(self) -> dict:
        """The master's system state: {"publishers"|"subscribers": {topic: [nodes]}}."""
        import xmlrpc.client

        proxy = xmlrpc.client.ServerProxy(self.env["ROS_MASTER_URI"])
        # the master API's answer: (code, status message, [publishers, subscribers, services]),
        # each a list of [name, [node, ...]]
        answer = proxy.getSystemState("/cableload_graph")
        code, message, (pubs, subs, _services) = cast("tuple[int, str, list[list[Any]]]", answer)
        if code != 1:
            raise RuntimeError(f"master getSystemState failed: {message}")
        return {"publishers": dict(pubs), "subscribers": dict(subs)}

    def wait_for(self, condition, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {seconds:g} s waiting for {what}")
            time.sleep(0.05)

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            proc = self.processes[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 5.0
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()


def last_json(text: str):
    """The last line of ``text`` that is a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON object in the output:\n{text[-3000:]}")
