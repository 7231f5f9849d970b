CREATE TABLE events (id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
-- pgsteady-test: above ran in an earlier migration
-- ON ONLY the partitioned parent builds nothing: an invalid index on the parent, at once.
CREATE INDEX events_at ON ONLY events (at);
