-- ON ONLY means a partitioned table (it changes nothing for another): nothing is built.
CREATE INDEX measurements_at ON ONLY measurements (at);
