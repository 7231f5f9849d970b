CREATE TABLE accounts (id text PRIMARY KEY, email text NOT NULL, nickname text);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE accounts ALTER COLUMN nickname SET NOT NULL;
