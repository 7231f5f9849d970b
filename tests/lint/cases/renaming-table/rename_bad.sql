ALTER TABLE users RENAME TO accounts;
