CREATE TABLE users (id bigint PRIMARY KEY, name varchar(100), bio varchar(200));
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE users ALTER COLUMN name TYPE varchar(500);
ALTER TABLE users ALTER COLUMN bio TYPE varchar;
