-- pgsteady-test: runner=prisma assume_runner_timeouts=true
ALTER TABLE users ADD COLUMN nickname text;
COMMIT;
ALTER TABLE users ADD COLUMN bio text;
