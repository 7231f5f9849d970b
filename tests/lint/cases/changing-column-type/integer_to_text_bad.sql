CREATE TABLE accounts (id bigint PRIMARY KEY, pin integer);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE accounts ALTER COLUMN pin SET DATA TYPE text;
