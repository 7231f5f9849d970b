-- pgsteady: ignore require-concurrent-index-creation -- built concurrently anyway
CREATE INDEX CONCURRENTLY orders_status_idx ON orders (status);
