CREATE TABLE labels (id serial, name text, PRIMARY KEY (id));
