"""DETACH PARTITION without CONCURRENTLY takes ACCESS EXCLUSIVE on the partitioned table.

A plain ``ALTER TABLE parent DETACH PARTITION child`` locks the whole partitioned table
(every partition's readers and writers wait) and queues behind any query on it. From
PostgreSQL 14, ``DETACH PARTITION ... CONCURRENTLY`` takes only SHARE UPDATE EXCLUSIVE on the
parent and waits for running queries instead of blocking new ones. It cannot run inside a
transaction block, so give it a migration of its own that the runner runs outside one.
Before 14 the lock is the same and there is no way round it: a short lock_timeout bounds the
queue behind it.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "require-concurrent-detach-partition"
MESSAGE = "DETACH PARTITION without CONCURRENTLY locks the whole partitioned table"
HELP = ("Detach without blocking queries, outside a transaction block: "
        "ALTER TABLE parent DETACH PARTITION child CONCURRENTLY;")
HELP_BEFORE = ("This major has no DETACH PARTITION CONCURRENTLY (PostgreSQL 14 added it): "
               "detach at a quiet time with a short lock_timeout and retries "
               "(SET lock_timeout = '2s';), or upgrade to 14+")
MIN_PG_VERSION = None
FEATURE = _majors.DETACH_PARTITION_CONCURRENTLY
COMMANDS = ("AT_DetachPartition",)
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    partition = (cmd.get("def") or {}).get("PartitionCmd", {})
    if not partition.get("concurrent"):
        child = qualified(partition.get("name") or {"relname": "?"})
        yield Hit(f"{child} from {qualified(ctx.relation)}", table=table_ref(ctx.relation),
                  command=cmd)
