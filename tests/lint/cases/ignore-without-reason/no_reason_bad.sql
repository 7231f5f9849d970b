-- pgsteady: ignore ban-drop-column
ALTER TABLE users DROP COLUMN legacy_flag;
