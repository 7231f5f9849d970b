CREATE TABLE paths (id bigint PRIMARY KEY, p text);
INSERT INTO paths (id, p) VALUES (1, $$
\windows\path$$);
