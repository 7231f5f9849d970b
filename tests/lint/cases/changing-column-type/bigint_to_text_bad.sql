CREATE TABLE accounts (id bigint PRIMARY KEY, external_id bigint);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE accounts ALTER COLUMN external_id TYPE text;
