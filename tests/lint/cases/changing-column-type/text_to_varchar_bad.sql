CREATE TABLE users (id bigint PRIMARY KEY, nickname text);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE users ALTER COLUMN nickname TYPE varchar(32);
