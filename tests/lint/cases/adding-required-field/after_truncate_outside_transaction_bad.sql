-- pgsteady-test: assume_in_transaction=false
TRUNCATE TABLE alerts;
ALTER TABLE alerts ADD COLUMN resource text NOT NULL;
