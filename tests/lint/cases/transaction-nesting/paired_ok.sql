-- pgsteady-test: assume_in_transaction=false
BEGIN;
ALTER TABLE users ADD COLUMN nickname text;
COMMIT;
BEGIN;
ALTER TABLE users ADD COLUMN bio text;
ROLLBACK;
