-- pgsteady-test: runner=prisma assume_runner_timeouts=true
-- Sent as one query: the ALTER after the COMMIT runs in a new implicit transaction; if it
-- fails, the block's type change stays committed and Prisma marks the migration failed.
BEGIN;
CREATE TYPE "Role_new" AS ENUM ('USER', 'ADMIN');
ALTER TYPE "Role" RENAME TO "Role_old";
ALTER TYPE "Role_new" RENAME TO "Role";
DROP TYPE "Role_old";
COMMIT;
ALTER TABLE users ADD COLUMN nickname text;
