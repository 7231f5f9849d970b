-- pgsteady: no-transaction
CREATE INDEX CONCURRENTLY orders_cust_idx ON orders (customer_id, status) INCLUDE (created_at, total);
