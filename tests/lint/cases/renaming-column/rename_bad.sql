ALTER TABLE users RENAME COLUMN name TO full_name;
