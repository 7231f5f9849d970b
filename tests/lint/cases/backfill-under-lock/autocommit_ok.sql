-- pgsteady-test: assume_in_transaction=false
ALTER TABLE users ADD COLUMN plan text;
UPDATE users SET plan = 'free' WHERE id BETWEEN 1 AND 5000;
