"""Lab scenarios: each reproduces one outage mechanism on the embedded cluster."""
