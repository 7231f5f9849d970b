"""Looking at a running PostgreSQL and PgBouncer: activity, locks, pools, logs."""
