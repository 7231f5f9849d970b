-- pgsteady: ignore-file ban-drop-column -- nothing is dropped here
ALTER TABLE users ADD COLUMN nickname text;
