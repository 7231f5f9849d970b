-- pgsteady-test: assume_runner_timeouts=false
ALTER TABLE users ADD COLUMN nickname text;
SET lock_timeout = '5s';
