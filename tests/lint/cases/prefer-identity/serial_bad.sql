CREATE TABLE tags (id bigserial PRIMARY KEY, name text);
