-- From LemmyNet/lemmy migrations/2020-06-30-135809_remove_mat_views/up.sql (diesel): the view
-- is dropped earlier in the file, so OR REPLACE creates a new one and replaces nothing.
DROP VIEW comment_view;
CREATE OR REPLACE VIEW comment_view AS (
    SELECT c.id, c.content FROM comment c
);
