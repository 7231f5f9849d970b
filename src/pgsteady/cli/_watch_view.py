"""The terminal view of ``pgsteady watch``: one rich renderable from one interval's data
(plain dicts, as the JSON lines carry them; nothing here reads a database)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_STATE_STYLE = {"firing": "bold red", "pending": "yellow"}


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


# SHOW POOLS' own names; on a narrow terminal the same names over two lines, so that no header
# is cut to "cl_wa…" (80 columns hold the pools table only so).
_POOL_COLUMNS = ("pool", "cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_login",
                 "maxwait", "refill stuck")
_POOL_COLUMNS_NARROW = ("pool", "cl_\nactive", "cl_\nwaiting", "sv_\nactive", "sv_\nidle",
                        "sv_\nlogin", "max-\nwait", "refill\nstuck")


class _ByWidth:
    """The wide renderable where it fits the console's width, else the narrow one."""

    def __init__(self, wide: Table, narrow: Table) -> None:
        self.wide, self.narrow = wide, narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Measured without the console's limit (a measurement is clipped to it).
        unbounded = options.update_width(10_000)
        fits = Measurement.get(console, unbounded, self.wide).maximum <= options.max_width
        yield self.wide if fits else self.narrow


def _pools(pools: list[dict[str, Any]], headers: tuple[str, ...]) -> Table:
    table = Table(title="PgBouncer pools", title_justify="left", expand=False)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold")
    for p in pools:
        stuck = p["refill_stuck_s"]
        table.add_row(f"{p['database']}/{p['user']}", str(p["cl_active"]),
                      Text(str(p["cl_waiting"]), style="yellow" if p["cl_waiting"] else ""),
                      str(p["sv_active"]), str(p["sv_idle"]), str(p["sv_login"]),
                      _age(p["maxwait_s"]),
                      Text(_age(stuck), style="bold red") if stuck else "-")
    return table


def render(view: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    up = ", ".join(f"{name} {'up' if ok else 'DOWN'}" for name, ok in view["up"].items())
    parts.append(Text(f"pgsteady watch  {view['at']}  ({up}; read in {view['scrape_s']:.3f}s)",
                      style="bold"))
    for name, error in view["errors"].items():
        parts.append(Text(f"  {name}: {error}", style="red"))
    if "pools" in view:
        parts.append(_ByWidth(_pools(view["pools"], _POOL_COLUMNS),
                              _pools(view["pools"], _POOL_COLUMNS_NARROW)))
    if "not_ready_per_minute" in view:
        rate = view["not_ready_per_minute"]
        parts.append(Text("not-ready closures a minute: "
                          + ("(measuring)" if rate is None else f"{rate:g}")))
    pg = view.get("postgres")
    if pg is not None:
        parts.append(Text(
            f"PostgreSQL connections {pg['connections_used']}/{pg['connections_usable']} "
            f"({pg['connections_used'] / max(1, pg['connections_usable']):.0%}), "
            f"idle in transaction {pg['idle_in_transaction']}, xmin horizon "
            f"{_age(pg['xmin_horizon_age_s'])}"))
        chains = Table(title="Blocking chains", title_justify="left")
        for column in ("root", "pid", "queued", "longest wait", "relations"):
            chains.add_column(column, overflow="fold")
        for c in pg["chains"]:
            chains.add_row(c["root"], str(c["root_pid"]), str(c["queued"]),
                           _age(c["longest_wait_s"]),
                           ", ".join(f"{r} {n}" for r, n in c["relations"].items()))
        if not pg["chains"]:
            chains.add_row("(none)", "", "", "", "")
        parts.append(chains)
        longest = Table(title="Longest transactions", title_justify="left")
        for column in ("application_name", "pid", "state", "open for"):
            longest.add_column(column, overflow="fold")
        for s in pg["longest_transactions"]:
            longest.add_row(s["application_name"], str(s["pid"]), s["state"],
                            _age(s["xact_age_s"]))
        parts.append(longest)
    alerts = Table(title="Alerts", title_justify="left")
    for column in ("alert", "labels", "state", "for", "value"):
        alerts.add_column(column, overflow="fold")
    for a in view["alerts"]:
        labels = ", ".join(f"{k}={v}" for k, v in a["labels"].items())
        alerts.add_row(a["alert"], labels, Text(a["state"], style=_STATE_STYLE[a["state"]]),
                       f"{_age(a['active_for_s'])} (of {_age(a['for_s'])})", f"{a['value']:g}")
    if not view["alerts"]:
        alerts.add_row("(none pending or firing)", "", "", "", "")
    parts.append(alerts)
    parts.append(Text(f"{view['alerts_quiet']} rules quiet, {view['alerts_no_data']} without "
                      "data here (client, migration and kube metrics come from elsewhere); "
                      "Ctrl-C to stop", style="dim"))
    return Group(*parts)
