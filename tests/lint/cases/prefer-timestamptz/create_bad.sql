CREATE TABLE visits (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamp without time zone NOT NULL);
