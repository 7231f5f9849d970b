CREATE TYPE shipment_state AS ENUM ('new', 'canceled');
ALTER TYPE shipment_state RENAME VALUE 'canceled' TO 'cancelled';
