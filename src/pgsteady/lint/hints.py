"""What a parse error's message adds: the likely cause, when the text around it shows one.

PostgreSQL names the token it stopped at; the usual reasons behind the two most common
errors in migrations (a missing ``;``, a pasted character that only looks blank) are told
here, so the one-line error says how to fix it.
"""

from __future__ import annotations

import re

from pgsteady.sql.text import BLANKS

# Statement keywords: a parse error at one of these, first on its line, usually means the
# line before lacks its ';'.
_STATEMENT_WORDS = frozenset({
    "ALTER", "ANALYZE", "BEGIN", "CALL", "CLUSTER", "COMMENT", "COMMIT", "COPY", "CREATE",
    "DELETE", "DO", "DROP", "GRANT", "INSERT", "LOCK", "REFRESH", "REINDEX", "RESET", "REVOKE",
    "SELECT", "SET", "TRUNCATE", "UPDATE", "VACUUM", "WITH",
})


def odd_blank_hint(text: str, offset: int) -> str:
    """A hint when the error sits on a character that looks blank but is not blank to
    PostgreSQL (a no-break space pasted from a web page, \\x1c, ...); else ``""``."""
    for char in text[offset:offset + 64]:  # the token the error names, odd blanks included
        if char in BLANKS:
            return ""
        if char.isspace():
            break
    else:
        return ""
    return (f" (U+{ord(char):04X} looks blank but PostgreSQL takes only spaces, tabs and "
            f"newlines as blanks: replace it with a space)")


def missing_semicolon_hint(text: str, offset: int) -> str:
    """``"; is a ';' missing at the end of line N?"`` when the error sits at a statement
    keyword that starts its line and the line before does not end with ';'; else ``""``."""
    line_start = text.rfind("\n", 0, offset) + 1
    if text[line_start:offset].strip():
        return ""
    word = re.match(r"[A-Za-z]+", text[offset:offset + 12])
    if not word or word[0].upper() not in _STATEMENT_WORDS:
        return ""
    before = text[:line_start].rstrip()
    lines = before.split("\n")
    while lines and (not lines[-1].strip() or lines[-1].strip().startswith("--")):
        lines.pop()
    if not lines or lines[-1].rstrip().endswith(";"):
        return ""
    return f" (is a ';' missing at the end of line {len(lines)}?)"
