CREATE TABLE orders (id bigint PRIMARY KEY);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE orders ADD COLUMN status text NOT NULL DEFAULT 'new', ALTER COLUMN status DROP DEFAULT;
