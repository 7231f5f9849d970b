"""Debug lines that cost no import when nobody listens.

``logging`` (with traceback, linecache and tokenize behind it) is ~3 ms of a ``pgsteady lint``
start-up, a tenth of what a pre-commit hook waits for. The command configures logging only
when ``-v`` asks for messages or a verb has imported it anyway (psycopg does). Until then no
handler would show a debug line, so there is none to format: :func:`debug` sends it only when
logging is loaded.
"""

from __future__ import annotations

import sys


def debug(name: str, message: str, *args: object) -> None:
    """``logging.getLogger(name).debug(message, *args)`` if logging is in use, else nothing."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(name).debug(message, *args)
