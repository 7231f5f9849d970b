create table stock (sku text primary key, n int not null default 0);
