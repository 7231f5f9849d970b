CREATE TABLE sessions (id bigint PRIMARY KEY, token char(36));
-- pgsteady-test: above ran in an earlier migration
-- char(n) -> varchar(n) trims trailing blanks from every value: a rewrite.
ALTER TABLE sessions ALTER COLUMN token TYPE varchar(36);
