CREATE TABLE orgs (id bigint PRIMARY KEY, x int);
-- pgsteady-test: above ran in an earlier migration
-- The table exists: IF NOT EXISTS leaves the old, full one, whose index build blocks writes.
CREATE TABLE IF NOT EXISTS orgs (id bigint PRIMARY KEY, x int);
CREATE INDEX orgs_x ON orgs (x);
