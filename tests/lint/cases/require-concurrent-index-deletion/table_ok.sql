-- dropping a table is another rule's business
DROP TABLE IF EXISTS scratch; -- pgsteady: ignore ban-drop-table -- scratch table, never read
