-- pgsteady: ignore no-such-rule -- typo
ALTER TABLE users ADD COLUMN nickname text;
