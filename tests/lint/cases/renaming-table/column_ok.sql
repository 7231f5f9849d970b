-- pgsteady: ignore-file renaming-column -- column is unused
ALTER TABLE users RENAME COLUMN name TO full_name;
