CREATE TABLE events (id int DEFAULT nextval('events_id_seq'), day date, PRIMARY KEY (day, id));
