-- pgsteady-test: assume_in_transaction=true
-- pgsteady: no-transaction
CREATE INDEX CONCURRENTLY orders_status_idx ON orders (status);
