"""The lab's one way to start a server on a port: a picked port lost to another process is
picked again, a fixed one that is taken is refused in one line, and the process is kept for
its owner to stop either way."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.errors import LabError
from pgsteady.lab import _process

# A tiny server: binds the port it is given (or dies saying the address is in use), listens.
SERVER = ("import socket, sys, time\n"
          "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
          "time.sleep(60)\n")


class _Launcher:
    """``launch(port)`` for a real process, keeping every process it started."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.log_path = tmp_path / "server.log"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []

    def __call__(self, port: int) -> subprocess.Popen[bytes]:
        self.ports.append(port)
        proc = _process.spawn([sys.executable, "-c", SERVER, str(port)],
                              log_path=self.log_path, who=_process.RunAs(),
                              death_signal=signal.SIGTERM, cwd=self.tmp_path)
        self.procs.append(proc)
        return proc

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.ports[-1]), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        for proc in self.procs:
            _process.stop(proc, signal.SIGTERM, grace=5)


def _listener() -> socket.socket:
    """A port another process holds (bound, not listening: nothing answers on it)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    return taken


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, monkeypatch):
    """The first free port offered is taken by someone else by the time the server binds it:
    the server is started again on another, and that port is the one returned."""
    launcher = _Launcher(tmp_path)
    with _listener() as taken:
        offered = [taken.getsockname()[1]]
        real_free_port = _process.free_port
        monkeypatch.setattr(_process, "free_port",
                            lambda: offered.pop() if offered else real_free_port())
        try:
            port = _process.start_listening("the test server", launcher, launcher.ready,
                                            log_path=launcher.log_path, timeout=30)
        finally:
            launcher.stop()
    assert len(launcher.ports) == 2
    assert port == launcher.ports[1] != launcher.ports[0]


def test_a_taken_fixed_port_is_one_line_naming_it_and_nothing_starts(tmp_path):
    """A fixed port another process holds is refused before anything is spawned."""
    launcher = _Launcher(tmp_path)
    with _listener() as taken:
        port = taken.getsockname()[1]
        with pytest.raises(LabError, match=f"port {port} on 127.0.0.1 .* is taken"):
            _process.start_listening("the test server", launcher, launcher.ready,
                                     log_path=launcher.log_path, timeout=30, fixed=port)
    assert launcher.procs == []


def test_a_server_keeps_the_port_it_had(tmp_path):
    """A restart (``port`` given, not fixed) starts on that port, without picking."""
    launcher = _Launcher(tmp_path)
    port = _process.free_port()
    try:
        assert _process.start_listening("the test server", launcher, launcher.ready,
                                        log_path=launcher.log_path, timeout=30,
                                        port=port) == port
    finally:
        launcher.stop()
    assert launcher.ports == [port]
