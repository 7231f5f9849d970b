"""Database-free knowledge of SQL text and statements: what lint, migrate, preflight, doctor share.

``text`` (scanner, splitter, secret masking), ``pglast_loader`` (the parser, loaded lazily),
``statement_kinds``, and the lock oracle: ``locks``, ``reads``, ``analysis``, ``classify`` and
``opaque`` (what a ``DO`` block runs). Nothing is imported here: each caller pays only for the
module it uses (``pgsteady lint`` starts without pglast's AST).
"""
