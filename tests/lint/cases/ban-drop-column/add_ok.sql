ALTER TABLE users ADD COLUMN nickname text;
