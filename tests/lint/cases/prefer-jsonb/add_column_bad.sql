ALTER TABLE events ADD COLUMN meta json;
