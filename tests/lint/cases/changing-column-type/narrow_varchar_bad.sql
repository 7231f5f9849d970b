CREATE TABLE users (id bigint PRIMARY KEY, email varchar(64));
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE users ALTER COLUMN email TYPE varchar(32);
