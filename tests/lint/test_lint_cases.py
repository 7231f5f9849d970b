"""Every rule's bad cases are reported by that rule and its ok cases are not."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cases import all_cases, lint_case

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_case(case: Path):
    """A *_bad.sql case yields its rule's finding; a *_ok.sql case yields no finding at all."""
    sql = case.read_text(encoding="utf-8")
    report = lint_case(sql, str(case))
    assert report.syntax_error is None, report.syntax_error
    rule_id = case.parent.name
    hits = [f for f in report.findings if f.rule == rule_id]
    if case.stem.endswith("_bad"):
        assert hits, f"{rule_id} missed {case.name}: {[f.rule for f in report.findings]}"
        assert all(f.line >= 1 and f.col >= 1 for f in hits)
    else:
        assert case.stem.endswith("_ok"), f"case files end in _bad.sql or _ok.sql: {case}"
        assert not hits, [f.message for f in hits]
        # An ok case shows the safe way, so no other rule may object to it either.
        assert not report.findings, [f"{f.rule}: {f.message}" for f in report.findings]
