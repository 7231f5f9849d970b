-- pgsteady: ignore ban-drop-column -- unused since release 41
ALTER TABLE users DROP COLUMN legacy_flag;
