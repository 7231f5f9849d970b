TRUNCATE TABLE alert_log;
ALTER TABLE alerts ADD COLUMN resource text NOT NULL;
