CREATE TABLE users (id bigint PRIMARY KEY, name varchar(100), bio varchar(200));
-- pgsteady-test: above ran in an earlier migration
-- varchar -> text is binary coercible: no rewrite, no index rebuild.
ALTER TABLE users ALTER COLUMN name TYPE text;
