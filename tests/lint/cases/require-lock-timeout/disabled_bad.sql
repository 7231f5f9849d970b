-- pgsteady-test: assume_runner_timeouts=false
SET lock_timeout = 0;
ALTER TABLE users ADD COLUMN nickname text;
