-- pgsteady-test: runner=prisma assume_runner_timeouts=true
-- Prisma writes this block itself when an enum loses a value: statements before BEGIN join it.
ALTER TABLE users ADD COLUMN nickname text;
BEGIN;
CREATE TYPE "Role_new" AS ENUM ('USER', 'ADMIN');
ALTER TYPE "Role" RENAME TO "Role_old";
ALTER TYPE "Role_new" RENAME TO "Role";
DROP TYPE "Role_old";
COMMIT;
