-- pgsteady-test: assume_in_transaction=true
BEGIN;
ALTER TABLE users ADD COLUMN nickname text;
COMMIT;
