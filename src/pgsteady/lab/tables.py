"""Terminal tables that fit the terminal: no cell cut to an ellipsis, and a legend.

A rich ``Table`` squeezed below its columns' longest words cuts cells to "…" (issue 31: at 80
columns every lab table was ellipses). A :class:`FitTable` knows each column's priority and
meaning; when it is printed it keeps the most important columns that fit whole at the
console's width (cells wrap at spaces, never inside a word), and prints a legend under the
table: the short headers' meanings, the notes, and which columns this width left out.
Shared by the labs' and the model's reports; renderers only read results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pgsteady._extras import needs

with needs("cli", "the lab's tables"):
    from rich import box
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

ALWAYS = 0
#: The legend's meanings wrap at this width, whatever the console's.
LEGEND_WIDTH = 96


@dataclass(frozen=True)
class Column:
    """``priority``: lower is kept longer (``ALWAYS``: never dropped); ``meaning``: the
    legend's line for a header that does not explain itself."""

    header: str
    meaning: str = ""
    priority: int = ALWAYS
    justify: Literal["left", "right"] = "right"


class FitTable:
    """A table of markup strings that drops its least important columns until every cell fits
    whole in the console's width, then prints a legend (see the module's docstring)."""

    def __init__(self, title: str, columns: Sequence[Column], *, caption: str = "",
                 notes: Sequence[tuple[str, str]] = ()) -> None:
        self.title = title
        self.columns = list(columns)
        self.caption = caption
        self.notes = list(notes)
        self.rows: list[list[str]] = []

    def add_row(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def shown(self, width: int, console: Console | None = None) -> list[str]:
        """The headers printed at ``width`` (for tests and the legend)."""
        console = console or Console(width=width, no_color=True)
        return [self.columns[i].header for i in self._fit(console, console.options
                                                           .update_width(width))[0]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keep, widths = self._fit(console, options)
        table = Table(title=self.title, title_justify="left", caption=self.caption or None,
                      caption_justify="left", box=box.SQUARE, padding=(0, 1))
        for index, width in zip(keep, widths, strict=True):
            column = self.columns[index]
            table.add_column(column.header, justify=column.justify, width=width,
                             overflow="fold")
        for row in self.rows:
            table.add_row(*(row[i] for i in keep))
        yield table
        entries = self.legend(keep)
        if entries:
            legend = Table.grid(padding=(0, 1))
            legend.add_column(no_wrap=True, style="bold")
            # A paragraph's width: a file or a pipe gets a 200-column console, and a long
            # note would otherwise pad every legend line to it.
            legend.add_column(max_width=LEGEND_WIDTH)
            for key, meaning in entries:
                legend.add_row(Text(key), Text(meaning))
            yield legend

    def legend(self, keep: Sequence[int] | None = None) -> list[tuple[str, str]]:
        """(key, meaning) lines under the table: the kept columns' short headers, the notes,
        and the columns this width left out."""
        kept = range(len(self.columns)) if keep is None else keep
        lines = [(self.columns[i].header, self.columns[i].meaning) for i in kept
                 if self.columns[i].meaning]
        lines += self.notes
        dropped = [c.header for i, c in enumerate(self.columns) if i not in kept]
        if dropped:
            lines.append(("not shown", f"{', '.join(dropped)} (too wide for this terminal; "
                                       f"--json has every column)"))
        return lines

    def _fit(self, console: Console, options: ConsoleOptions) -> tuple[list[int], list[int]]:
        """(columns kept, their content widths): the most important columns whose longest
        words fit side by side; then headers wrap before cells do, and the widest cells
        wrap first."""
        headers = [self._measure(console, options, i, header=True)
                   for i in range(len(self.columns))]
        cells = [self._measure(console, options, i, header=False)
                 for i in range(len(self.columns))]
        floor = [max(h.minimum, c.minimum) for h, c in zip(headers, cells, strict=True)]
        keep = list(range(len(self.columns)))
        by_priority = sorted((i for i, c in enumerate(self.columns) if c.priority != ALWAYS),
                             key=lambda i: (self.columns[i].priority, i))
        while True:
            # a border before each column and one after the last, one space each side
            room = options.max_width - (len(keep) + 1) - 2 * len(keep)
            if sum(floor[i] for i in keep) <= room or not by_priority:
                break
            keep.remove(by_priority.pop())
        widths = [max(headers[i].maximum, cells[i].maximum) for i in keep]
        for stage_floor in ([max(floor[i], cells[i].maximum) for i in keep],
                            [floor[i] for i in keep]):
            while sum(widths) > room:  # from the widest column that can still give
                give = [j for j in range(len(keep)) if widths[j] > stage_floor[j]]
                if not give:
                    break
                widths[max(give, key=lambda j: widths[j])] -= 1
        return keep, widths

    def _measure(self, console: Console, options: ConsoleOptions, index: int, *,
                 header: bool) -> Measurement:
        texts: Iterable[str] = (self.columns[index].header,) if header else \
            (row[index] for row in self.rows)
        measured = [Measurement.get(console, options, Text.from_markup(text)) for text in texts]
        return Measurement(max((m.minimum for m in measured), default=1),
                           max((m.maximum for m in measured), default=1))
