ALTER TABLE events ADD COLUMN meta jsonb;
