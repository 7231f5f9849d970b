CREATE TABLE tasks (shard_id int NOT NULL, task_id bigint NOT NULL, PRIMARY KEY (shard_id, task_id));
