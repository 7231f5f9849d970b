-- From LemmyNet/lemmy migrations/2019-03-05-233828_create_comment/up.sql (diesel): a table's
-- foreign key to itself locks nothing anyone else uses; only post is an existing table here.
CREATE TABLE comment (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    post_id bigint REFERENCES post ON UPDATE CASCADE ON DELETE CASCADE NOT NULL,
    parent_id bigint REFERENCES COMMENT ON UPDATE CASCADE ON DELETE CASCADE,
    content text NOT NULL
);
