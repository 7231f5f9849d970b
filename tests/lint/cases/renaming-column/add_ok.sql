ALTER TABLE users ADD COLUMN full_name text;
