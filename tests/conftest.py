"""Suite-wide guards: a test leaves the process as it found it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

_WATCHED = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _signal_handlers_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that changes SIGINT's or SIGTERM's handler (an in-process CLI run, a server's
    own handlers) fails and the handler is put back, so no later test inherits it: Ctrl-C
    tests elsewhere rely on Python's default KeyboardInterrupt."""
    before = {sig: signal.getsignal(sig) for sig in _WATCHED}
    yield
    changed = [signal.Signals(sig).name for sig in _WATCHED if signal.getsignal(sig) != before[sig]]
    for sig in _WATCHED:
        signal.signal(sig, before[sig])  # type: ignore[arg-type]
    if changed:
        pytest.fail(f"{request.node.nodeid} left {', '.join(changed)} with another handler")
