"""A statement the linter could not analyse: it was skipped, and nothing in it was checked.

Valid SQL can still be out of reach: an expression nested deeper than the parser's stack
allows (thousands of ``||`` or ``CASE`` levels, usually generated), or a ``DO`` block whose
PL/pgSQL body does not parse on its own. The rest of the file is linted as usual; this
warning says which statement was not, so a risk inside it is not silently passed over.
Review it by hand, or split the expression (a VALUES list or a temporary table instead of a
huge generated expression). Reported by the engine, as a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

ID = "unparsed-statement"
MESSAGE = "statement not analysed"
HELP = ("Review it by hand, or split the generated expression (e.g. INSERT ... VALUES rows, "
        "or a temporary table) so it parses; silence with -- pgsteady: ignore "
        "unparsed-statement -- <reviewed by ...>")
MIN_PG_VERSION = None
STATEMENTS: tuple[str, ...] = ()
SEVERITY = "warning"


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    return iter(())
