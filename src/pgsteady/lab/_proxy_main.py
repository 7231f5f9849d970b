"""Entry point of :class:`~pgsteady.lab.proxy.ProxyProcess`'s child: ``UPSTREAM PORT DELAY``."""

from __future__ import annotations

import json
import signal
import sys

from pgsteady.errors import LabError
from pgsteady.lab.proxy import FaultProxy, serve_commands


def main(argv: list[str]) -> int:
    # Ctrl-C reaches the whole process group; the parent stops us (stdin closes, SIGTERM).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    upstream, port, delay = int(argv[0]), int(argv[1]), float(argv[2])
    proxy = FaultProxy(upstream, port=port, connect_delay=delay)
    try:
        proxy.start()
    except LabError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    print(json.dumps({"ok": proxy.port}), flush=True)
    try:
        serve_commands(proxy, sys.stdin, sys.stdout)
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
