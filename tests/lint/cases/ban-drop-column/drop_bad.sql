ALTER TABLE users DROP COLUMN legacy_flag;
