"""Suite-wide guards: a test leaves the process as it found it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

_WATCHED = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _signal_handlers_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that changes SIGINT's or SIGTERM's handler (an in-process CLI run, a server's
    own handlers) or leaves them blocked in the main thread fails, and both are put back, so
    no later test inherits them: Ctrl-C tests elsewhere rely on Python's default
    KeyboardInterrupt."""
    before = {sig: signal.getsignal(sig) for sig in _WATCHED}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = [signal.Signals(sig).name for sig in _WATCHED if signal.getsignal(sig) != before[sig]]
    for sig in _WATCHED:
        signal.signal(sig, before[sig])  # type: ignore[arg-type]
    now_blocked = signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    masked = [signal.Signals(sig).name for sig in _WATCHED
              if sig in now_blocked and sig not in blocked]
    if changed:
        pytest.fail(f"{request.node.nodeid} left {', '.join(changed)} with another handler")
    if masked:
        pytest.fail(f"{request.node.nodeid} left {', '.join(masked)} blocked in the main thread")
