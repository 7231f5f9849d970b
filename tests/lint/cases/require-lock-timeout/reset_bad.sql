-- pgsteady-test: assume_runner_timeouts=false
SET lock_timeout = '5s';
RESET lock_timeout;
ALTER TABLE users ADD COLUMN nickname text;
