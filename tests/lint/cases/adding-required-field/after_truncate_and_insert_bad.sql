TRUNCATE TABLE alerts;
INSERT INTO alerts (id) VALUES (1);
ALTER TABLE alerts ADD COLUMN resource text NOT NULL;
