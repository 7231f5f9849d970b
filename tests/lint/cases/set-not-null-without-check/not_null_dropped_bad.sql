CREATE TABLE accounts (id text PRIMARY KEY, email text NOT NULL);
ALTER TABLE accounts ALTER COLUMN email DROP NOT NULL;
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE accounts ALTER COLUMN email SET NOT NULL;
