-- Nothing says what users.name was: reported as a warning that it may rewrite.
ALTER TABLE users ALTER COLUMN name TYPE text;
