-- pgsteady: no-transaction
CREATE INDEX CONCURRENTLY orders_status_idx ON orders (status);
