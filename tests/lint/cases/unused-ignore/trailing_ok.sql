ALTER TABLE users DROP COLUMN legacy_flag; -- pgsteady: ignore ban-drop-column -- unused since release 41
