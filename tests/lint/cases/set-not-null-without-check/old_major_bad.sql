-- pgsteady-test: pg_version=10
ALTER TABLE users ALTER COLUMN email SET NOT NULL;
