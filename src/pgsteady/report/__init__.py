"""``pgsteady report``: one self-contained HTML page from the labs' and the model's JSON."""

from pgsteady.report.build import build_report
from pgsteady.report.inputs import Result, load, load_all

__all__ = ["Result", "build_report", "load", "load_all"]
