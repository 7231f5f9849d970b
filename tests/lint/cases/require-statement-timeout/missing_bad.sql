-- pgsteady-test: assume_runner_timeouts=false
SET lock_timeout = '5s';
ALTER TABLE users ADD COLUMN nickname text;
