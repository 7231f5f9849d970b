CREATE TABLE tmp_import (id bigint, payload jsonb);
DROP TABLE tmp_import;
