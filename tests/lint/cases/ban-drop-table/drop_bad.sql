DROP TABLE legacy_events;
