CREATE TABLE events (id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
-- pgsteady-test: above ran in an earlier migration
-- Builds the index on every partition, each under a SHARE lock (CONCURRENTLY is refused here).
CREATE INDEX events_at ON events (at);
