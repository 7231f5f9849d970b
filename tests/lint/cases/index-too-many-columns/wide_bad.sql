-- pgsteady: no-transaction
CREATE INDEX CONCURRENTLY orders_wide_idx ON orders (customer_id, status, created_at, total);
