-- pgsteady-test: assume_in_transaction=false
CREATE INDEX CONCURRENTLY orders_status_idx ON orders (status);
REINDEX INDEX CONCURRENTLY orders_status_idx;
