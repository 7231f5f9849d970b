"""sqitch: a ``sqitch.plan`` beside ``deploy/``, whose scripts carry their own ``BEGIN`` /
``COMMIT`` (sqitch adds no transaction). ``pgsteady lint`` judges them; migrate does not run
them."""

from __future__ import annotations

from pathlib import Path

from pgsteady.tools._base import Tool, UpPart

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable

    from pgsteady.tools._base import Listing


class Sqitch(Tool):
    name = "sqitch"
    display = "sqitch"
    migrates = False

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), False  # none added: the scripts carry BEGIN/COMMIT

    def lint_files(self, listing: Listing, down: Callable[[Path], None],
                   other: Callable[[Path, str], None]) -> list[Path] | None:
        return deploy_files(listing.folder)


def plan_in(place: Path) -> bool:
    """Whether ``place`` holds a sqitch project (its ``sqitch.plan``)."""
    return (place / "sqitch.plan").is_file()


def deploy_files(folder: Path) -> list[Path]:
    """The deploy scripts of a sqitch project (``deploy/``, or the folder itself), sorted."""
    deploy = folder / "deploy" if (folder / "deploy").is_dir() else folder
    return sorted(p for p in deploy.rglob("*.sql") if p.is_file())


TOOL = Sqitch()
