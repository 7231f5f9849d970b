CREATE TABLE orders (id bigint PRIMARY KEY, total numeric(10, 2));
-- pgsteady-test: above ran in an earlier migration
-- More precision at the same scale: no rewrite.
ALTER TABLE orders ALTER COLUMN total TYPE numeric(12, 2);
