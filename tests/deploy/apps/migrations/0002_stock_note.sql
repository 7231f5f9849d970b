alter table stock add column note text;
