"""Other migration tools' conventions, one module each, found through :mod:`.registry`.

Each module (``pgsteady``, ``prisma``, ``goose``, ``golang_migrate``, ``dbmate``, ``flyway``,
``sqlx``, ``diesel``, ``popx``, ``sqitch``, ``tern``, ``sql_migrate``, ``alembic``,
``plain``) makes one :class:`~._base.Tool`: how files are named and ordered, which part of a
file is its Up migration, whether it runs in a transaction, the history table the tool keeps
(its DDL, how it is read and written, its checksums), and how a folder shows it is the tool's.
``pgsteady migrate`` and ``pgsteady lint`` read the same objects. Adding a tool: one module
and its line in :data:`.registry.MODULES`, plus its tests.

Nothing is imported here, and no module of this package imports psycopg, pglast or rich:
lint loads them and must start fast.
"""
