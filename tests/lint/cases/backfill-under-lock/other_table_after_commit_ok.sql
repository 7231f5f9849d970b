-- pgsteady-test: assume_in_transaction=false
BEGIN;
ALTER TABLE orgs ADD COLUMN plan text;
COMMIT;
UPDATE users SET plan_id = 1 WHERE id BETWEEN 1 AND 5000;
