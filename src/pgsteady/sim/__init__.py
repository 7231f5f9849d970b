"""A discrete-event model of PgBouncer's pool drain (seed 000): checked against the lab,
fast enough to map where pools collapse for thousands of clients and several poolers."""
