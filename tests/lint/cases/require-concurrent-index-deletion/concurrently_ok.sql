-- pgsteady: no-transaction
DROP INDEX CONCURRENTLY IF EXISTS orders_status_idx;
