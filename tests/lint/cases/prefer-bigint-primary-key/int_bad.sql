CREATE TABLE tags (id int PRIMARY KEY, name text);
