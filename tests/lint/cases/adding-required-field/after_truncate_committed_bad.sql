-- pgsteady-test: assume_in_transaction=false
BEGIN;
TRUNCATE TABLE alerts;
COMMIT;
BEGIN;
ALTER TABLE alerts ADD COLUMN resource text NOT NULL;
COMMIT;
