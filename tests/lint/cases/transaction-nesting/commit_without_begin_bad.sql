-- pgsteady-test: assume_in_transaction=false
ALTER TABLE users ADD COLUMN nickname text;
COMMIT;
