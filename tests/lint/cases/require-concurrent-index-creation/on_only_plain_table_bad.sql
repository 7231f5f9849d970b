CREATE TABLE orders (id bigint PRIMARY KEY, status text);
-- pgsteady-test: above ran in an earlier migration
-- ONLY changes nothing on a table that is not partitioned: the whole index is built.
CREATE INDEX orders_status ON ONLY orders (status);
