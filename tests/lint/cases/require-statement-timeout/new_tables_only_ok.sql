-- pgsteady-test: assume_runner_timeouts=false
CREATE TABLE teams (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
CREATE TABLE members (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, team_id bigint NOT NULL REFERENCES teams (id));
CREATE INDEX members_team_id_idx ON members (team_id);
ALTER TABLE teams ADD COLUMN slug text NOT NULL;
