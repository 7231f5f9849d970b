"""pgsteady's testing support: a pytest plugin with a real PostgreSQL and PgBouncer.

Installed with pgsteady and loaded by pytest automatically (entry point ``pytest11``).
"""

from pgsteady.testing.plugin import FreshDatabase

__all__ = ["FreshDatabase"]
