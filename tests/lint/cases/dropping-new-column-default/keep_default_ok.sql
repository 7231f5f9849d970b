CREATE TABLE shop_product (id bigint PRIMARY KEY, name text NOT NULL);
-- pgsteady-test: above ran in an earlier migration
-- Django 5 db_default=True: the default stays in the database
ALTER TABLE "shop_product" ADD COLUMN "in_stock" boolean DEFAULT true NOT NULL;
