-- pgsteady-test: assume_runner_timeouts=false
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE users ADD COLUMN nickname text;
