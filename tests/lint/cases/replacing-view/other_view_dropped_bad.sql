DROP VIEW comment_view_old;
CREATE OR REPLACE VIEW comment_view AS SELECT c.id, c.content FROM comment c;
