-- pgsteady-test: runner=golang-migrate assume_runner_timeouts=true
BEGIN;
ALTER TABLE users ADD COLUMN nickname text;
ALTER TABLE users ADD COLUMN bio text;
COMMIT;
