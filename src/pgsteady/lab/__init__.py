"""The lab: an embedded PostgreSQL + PgBouncer + fault proxy, load, and the scenarios."""
