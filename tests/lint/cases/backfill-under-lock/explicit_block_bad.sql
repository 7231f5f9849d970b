-- pgsteady-test: assume_in_transaction=false
BEGIN;
ALTER TABLE users DROP COLUMN legacy; -- pgsteady: ignore ban-drop-column -- unused since v41
DELETE FROM users WHERE legacy_flag;
COMMIT;
