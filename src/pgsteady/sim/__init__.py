"""A discrete-event model of PgBouncer's pool drain (docs/outages.md, part 1): checked
against the lab, fast enough to map where pools collapse for thousands of clients and several
poolers."""

from pgsteady.sim.config import SimConfig
from pgsteady.sim.run import run_model, simulate

__all__ = ["SimConfig", "run_model", "simulate"]
