"""Django: the SQL of a migration is Django's own (``sqlmigrate``), one transaction per
migration unless the migration sets ``atomic = False`` (then each statement commits on its own);
``ENGINE = "pgsteady.django"`` sets lock_timeout and statement_timeout. ``pgsteady lint
--tool django`` and ``manage.py pgsteady_lint`` judge it (:mod:`pgsteady.django.lint` asks
Django for the SQL); ``manage.py migrate`` through the backend runs it, not ``pgsteady
migrate``. What to do instead, in Django's own terms, goes with each finding's help."""

from __future__ import annotations

from pathlib import Path

from pgsteady.tools._base import Tool, UpPart


class Django(Tool):
    name = "django"
    display = "Django"
    migrates = False
    sql_from_project = True

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), True  # one transaction per migration; atomic = False is per file


#: What to do in a Django migration instead, by rule id: appended to the rule's help.
DJANGO_HELP = {
    "require-concurrent-index-creation": "Django: AddIndexConcurrently "
    "(django.contrib.postgres.operations) in a migration with atomic = False",
    "require-concurrent-index-deletion": "Django: RemoveIndexConcurrently "
    "(django.contrib.postgres.operations) in a migration with atomic = False",
    "concurrently-in-transaction": "Django: set atomic = False on the migration",
    "constraint-missing-not-valid": "Django: AddConstraintNotValid, then ValidateConstraint "
    "in the next migration (django.contrib.postgres.operations)",
    "validate-in-same-transaction": "Django: ValidateConstraint in the next migration",
    "ban-drop-column": "Django: remove the field from the model in one release "
    "(SeparateDatabaseAndState, state_operations only), drop the column in a later one",
    "ban-drop-table": "Django: delete the model from the code first "
    "(SeparateDatabaseAndState), drop the table in a later release",
    "renaming-column": "Django: add the new field, write both, backfill, then remove the old "
    "one; or keep the column name with db_column=",
    "renaming-table": "Django: keep the table name with Meta.db_table=",
    "adding-required-field": "Django: give the field a default (or db_default=, Django 5+)",
    "dropping-new-column-default": "Django 5+: db_default= on the field keeps the default in "
    "the database",
    "changing-column-type": "Django: add a field of the new type, backfill, switch the code, "
    "remove the old field",
    "require-lock-timeout": "Django: ENGINE \"pgsteady.django\" runs every migration under a "
    "short lock_timeout, with retries",
    "require-statement-timeout": "Django: ENGINE \"pgsteady.django\" sets statement_timeout",
}


TOOL = Django()
