"""`pgsteady report` input handling: what it reads, and one clear line for what it cannot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from report_data import lock_queue, write

from pgsteady.report import build_report
from pgsteady.report.sections import verdict_of
from pgsteady.report.svg import nice_ticks

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PGSTEADY, "report", *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("{not json", "not valid JSON (line 1, column 2"),
        ('{"hello": "world"}', 'not a pgsteady lab or sim result (no "scenario" field)'),
        ('[1, 2]', "not a pgsteady lab or sim result"),
        ('{"schema_version": 2, "scenario": "pool-drain"}', "schema_version 2 is not supported"),
        ('{"scenario": "pool-drain"}', '"schema_version" is missing'),
        ('{"schema_version": 1, "scenario": "pool-drain", "source": "excel"}', '"source" is'),
        ('{"schema_version": 1, "scenario": "pool-drain", "runs": {"a": 1}}',
         '"runs" must be a list'),
        ('{"schema_version": 1, "scenario": "x", "runs": [{"per_second": 3}]}',
         'run 1: "per_second" must be a list'),
        ('{"schema_version": 1, "scenario": "pool-drain", "config": {"burst_workers": 3, '
         '"burst_start": "soon"}, "runs": [{"strategy": "a", "per_second": [{"t": 0}]}]}',
         "a field holds a value of the wrong kind (could not convert string to float"),
        ('{"schema_version": 1, "scenario": "phase-map", "x": {"knob": "pool-size", '
         '"values": [2]}, "y": {"knob": "workers", "values": [1]}, "runs": 4, '
         '"collapse_probability": {"naive": [["most"]]}}', "a field holds a value of the wrong"),
    ],
)
def test_malformed_or_foreign_json_is_one_line_and_exit_2(tmp_path, content, complaint):
    """Each fault names the file and what is wrong, exits 2, and writes no page."""
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "page" / "index.html"
    done = _report(str(bad), "--out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(bad) in lines[0] and complaint in lines[0]
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_missing_inputs_and_empty_folders_are_usage_errors(tmp_path):
    """A path that does not exist, or a folder with no JSON in it, exits 2 naming it."""
    done = _report(str(tmp_path / "nope.json"), "--out", str(tmp_path / "i.html"))
    assert done.returncode == 2 and "nope.json: no such file or folder" in done.stderr
    done = _report(str(tmp_path), "--out", str(tmp_path / "i.html"))
    assert done.returncode == 2 and "no JSON files in" in done.stderr


def test_one_bad_file_among_good_ones_fails_the_whole_page(tmp_path):
    """A folder with a good file and a foreign one writes nothing and names the foreign one."""
    write(tmp_path / "lock-queue.json", lock_queue())
    (tmp_path / "package.json").write_text('{"name": "x"}')
    out = tmp_path / "index.html"
    done = _report(str(tmp_path), "--out", str(out))
    assert done.returncode == 2 and "package.json" in done.stderr
    assert not out.exists()


def test_lock_queue_alone_makes_a_page_with_its_verdicts_and_charts(tmp_path):
    """A lock-queue file alone: both verdicts in words, two charts per strategy, data tables."""
    page = build_report([str(write(tmp_path / "lq.json", lock_queue()))], tmp_path / "index.html")
    html = page.read_text()
    assert html.count('<svg class="chart"') == 4
    assert "outage" in html and "held" in html
    assert "connection slots the apps may use (57)" in html and "a long log query" in html
    assert "never applied" in html and "applied at 12.5 s" in html
    assert "replica restarted" in html
    assert "<script src" not in html and "<link" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_unknown_scenarios_still_show_their_settings_and_verdicts(tmp_path):
    """A scenario without a renderer gets a generic section rather than being dropped."""
    data = {"schema_version": 1, "scenario": "cold-start", "source": "sim",
            "config": {"pool_size": 4}, "runs": [{"strategy": "naive", "run": 1,
                                                  "verdict": "collapsed"}]}
    page = build_report([str(write(tmp_path / "x.json", data))], tmp_path / "index.html")
    html = page.read_text()
    assert "cold-start (model)" in html and "collapsed" in html and "pool size" in html


def test_page_is_written_atomically_and_refuses_a_folder_as_out(tmp_path):
    """--out naming a folder is a usage error; a good run leaves no temp file behind."""
    src = write(tmp_path / "lq.json", lock_queue())
    (tmp_path / "site").mkdir()
    done = _report(str(src), "--out", str(tmp_path / "site"))
    assert done.returncode == 2 and "is a folder" in done.stderr
    done = _report(str(src), "--out", str(tmp_path / "site" / "index.html"))
    assert done.returncode == 0 and done.stdout.strip().endswith("index.html")
    assert [p.name for p in (tmp_path / "site").iterdir()] == ["index.html"]


def test_verdicts_fall_back_to_the_pool_drain_rule():
    """Files without a verdict field get the lab's words: collapsed, held, recovered, degraded."""
    assert verdict_of({"collapsed": True, "recovered": False}) == "collapsed"
    assert verdict_of({"collapsed": False, "recovered": True, "per_second": [{"timeouts": 0}]}) \
        == "held"
    assert verdict_of({"collapsed": False, "recovered": True, "per_second": [{"timeouts": 3}]}) \
        == "recovered"
    assert verdict_of({"collapsed": False, "recovered": False}) == "degraded"
    assert verdict_of({"verdict": "outage"}) == "outage"


def test_axis_ticks_are_round_and_cover_the_top():
    """Ticks go 1-2-5 from zero to at least the largest value."""
    assert nice_ticks(723) == [0, 200, 400, 600, 800]
    assert nice_ticks(0.4)[-1] >= 0.4
    ticks = nice_ticks(1234)
    assert ticks[0] == 0 and ticks[-1] >= 1234 and len(ticks) <= 7


def test_json_keeps_its_place_in_the_summary(tmp_path):
    """Two files: the page's verdict table lists each scenario with a link to its section."""
    a = write(tmp_path / "a.json", lock_queue(("steady",)))
    b = write(tmp_path / "b.json", {**lock_queue(("naive",)), "source": "lab"})
    html = build_report([str(a), str(b)], tmp_path / "index.html").read_text()
    for anchor in ("s1-lock-queue-lab", "s2-lock-queue-lab"):
        assert f'<section id="{anchor}">' in html and f'href="#{anchor}"' in html
    summary = html.split("<nav")[0]
    assert summary.index("steady") < summary.index("naive")


def test_model_outputs_get_a_phase_map_and_a_validation_table(tmp_path):
    """A phase map (its runs a count, not a list) and a validation file: a heatmap per
    strategy with numbers in its cells and the seed's cell outlined, and the lab-vs-model
    table, both summed up in the verdict table."""
    from report_data import phase_map, sim_validate

    pm = write(tmp_path / "phase-map.json", phase_map())
    sv = write(tmp_path / "validate.json", sim_validate())
    html = build_report([str(pm), str(sv)], tmp_path / "index.html").read_text()
    assert html.count('class="chart heatmap"') == 2
    assert html.count('class="seed-mark"') == 2          # pool 4, 50 ms: the seed's cell
    assert "At the outage's setting: 75% of runs collapse." in html
    assert "phase-map (model)" in html and "sim-validate (model)" in html
    assert "verdicts agree in 100% of cells" in html and "the model passes" in html
    assert "collapses somewhere in 89% of the map" in html


def test_a_lone_surrogate_in_a_name_still_makes_a_page(tmp_path):
    """JSON may escape half a UTF-16 pair ("\\ud800"); the page shows it as "?" instead of
    failing to write."""
    src = tmp_path / "x.json"
    src.write_text('{"schema_version": 1, "scenario": "x\\ud800", "runs": '
                   '[{"strategy": "a\\udc00", "verdict": "held"}]}')
    done = _report(str(src), "--out", str(tmp_path / "index.html"))
    assert done.returncode == 0, done.stderr
    assert "x? (lab)" in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_overlapping_bands_each_stay_in_view(tmp_path):
    """The long log query's band and the migration's (which starts while the query runs and
    lasts to the end) are both visible where they overlap: each kind has its own lane, where
    the migration's used to be drawn over the query's whole height."""
    import re

    html = build_report([str(write(tmp_path / "lq.json", lock_queue()))],
                        tmp_path / "index.html").read_text()
    chart = html[html.index('<svg class="chart"'):]
    chart = chart[:chart.index("</svg>")]

    def spans(kind: str) -> list[tuple[float, float, float, float]]:
        found = re.findall(rf'<rect class="{kind}" x="([\d.]+)" y="([\d.]+)" '
                           r'width="([\d.]+)" height="([\d.]+)"', chart)
        return [(float(x), float(y), float(x) + float(w), float(y) + float(h))
                for x, y, w, h in found]

    (query,), (migration,) = spans("band"), spans("band2")
    assert query[0] < migration[2] and migration[0] < query[2]  # they overlap in time
    assert query[3] <= migration[1] or migration[3] <= query[1]  # but not on the page


@pytest.mark.parametrize(("value", "shown"), [("Infinity", "inf"), ("-Infinity", "-inf"),
                                              ("NaN", "nan"), ("1e308", "1e+308"),
                                              ("1" + "0" * 30, "1" + "0" * 30)])
def test_numbers_no_chart_can_place_are_one_line_naming_the_field(tmp_path, value, shown):
    """Infinity, NaN and absurdly large numbers in a lab file exit 2 with one line naming the
    file and the field, instead of a traceback (chart ticks) or an SVG holding inf/nan."""
    text = json.dumps(lock_queue()).replace('"p99_ms": 12.0', f'"p99_ms": {value}', 1)
    bad = tmp_path / "lq.json"
    bad.write_text(text)
    out = tmp_path / "index.html"
    done = _report(str(bad), "--out", str(out))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(bad) in lines[0] and "runs[0].per_second[0].p99_ms" in lines[0]
    assert f"is {shown}," in lines[0]
    assert not out.exists()


def test_the_largest_accepted_numbers_still_draw(tmp_path):
    """Numbers up to the cap (1e15) make a page whose charts hold only finite coordinates."""
    data = lock_queue()
    data["runs"][1]["per_second"][0]["p99_ms"] = 1e15
    data["runs"][1]["per_second"][1]["sessions"] = -1e15
    html = build_report([str(write(tmp_path / "lq.json", data))], tmp_path / "i.html")
    svg = "".join(html.read_text().split("<svg")[1:])
    assert "inf" not in svg.lower() and "nan" not in svg.lower()


def test_huge_strings_are_cut_with_a_note(tmp_path):
    """A 1 MB strategy name and a 1 MB key are cut to 2,000 characters with a note saying how
    long they were: the page stays small (a 1 MB name made a 55 MB page)."""
    data = lock_queue()
    data["runs"][0]["strategy"] = "n" * 2**20
    data["config"]["k" * 2**20] = 1
    html = build_report([str(write(tmp_path / "lq.json", data))],
                        tmp_path / "i.html").read_text()
    assert len(html) < 2**20
    assert "[cut: 1,048,576 characters]" in html


def test_a_report_of_no_runs_is_refused(tmp_path):
    """A lab file whose "runs" is empty exits 2 with one line, not a page of "?"."""
    bad = write(tmp_path / "lq.json", {**lock_queue(), "runs": []})
    out = tmp_path / "index.html"
    done = _report(str(bad), "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(bad) in done.stderr and '"runs" is empty' in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("where", ["/proc/x.html", "/proc/nope/x.html", "/dev/null/x.html"])
def test_an_out_that_cannot_be_written_is_one_line(tmp_path, where):
    """--out where no file can be made (/proc, under a device) exits 2 with one line naming
    it, no traceback."""
    src = write(tmp_path / "lq.json", lock_queue())
    done = _report(str(src), "--out", where)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "--out" in done.stderr
