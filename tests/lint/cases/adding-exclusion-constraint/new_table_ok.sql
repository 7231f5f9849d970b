CREATE TABLE rooms_booked (room int, during tstzrange);
ALTER TABLE rooms_booked ADD CONSTRAINT no_overlap EXCLUDE USING gist (room WITH =, during WITH &&);
