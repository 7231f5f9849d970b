-- pgsteady-test: pg_version=10
ALTER TABLE users ADD COLUMN plan text DEFAULT 'free';
