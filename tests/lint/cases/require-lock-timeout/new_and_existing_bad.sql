-- pgsteady-test: assume_runner_timeouts=false
CREATE TABLE teams (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
CREATE INDEX teams_name_idx ON teams (name);
ALTER TABLE users ADD COLUMN nickname text;
