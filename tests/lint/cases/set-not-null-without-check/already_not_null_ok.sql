CREATE TABLE accounts (id text PRIMARY KEY, email text NOT NULL, team_id bigint, CONSTRAINT accounts_pair UNIQUE (email));
CREATE TABLE memberships (account_id text, team_id bigint, CONSTRAINT memberships_pkey PRIMARY KEY (account_id, team_id));
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE accounts ALTER COLUMN email SET NOT NULL;
ALTER TABLE accounts ALTER COLUMN id SET NOT NULL;
ALTER TABLE memberships ALTER COLUMN team_id SET NOT NULL;
