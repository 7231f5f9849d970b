-- IF NOT EXISTS may leave the old, full table in place: its index build still blocks writes.
CREATE TABLE IF NOT EXISTS orgs (id bigint PRIMARY KEY, x int);
CREATE INDEX orgs_x ON orgs (x);
