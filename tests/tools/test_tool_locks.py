"""The advisory lock keys each tool takes while it migrates, as its own source derives them:
pgsteady takes the same keys, so the tool and ``pgsteady migrate`` never run at once."""

from __future__ import annotations

import pytest

from pgsteady.tools import registry
from pgsteady.tools._base import go_advisory_lock_id, java_hash_code
from pgsteady.tools.flyway import flyway_lock_key
from pgsteady.tools.golang_migrate import CODER_LOCK

APP = registry.LockPlace("app", "public", "public", "schema_migrations")


def test_golang_migrate_keys_match_its_cli_and_library():
    """Database app, schema public: the CLI's key (URL path /app) and WithInstance's (app)."""
    assert registry.get("golang-migrate").advisory_locks(APP)[:2] == (1726534663, 1787120056)


def test_golang_migrate_key_wraps_as_go_uint32():
    """The product wraps modulo 2**32, so a key is never negative nor above 32 bits."""
    key = go_advisory_lock_id("public", "schema_migrations", "app")
    assert key == 1787120056 and 0 <= key < 2**32


def test_golang_migrate_takes_keys_for_the_current_schema_too():
    """A history in another schema than current_schema(): keys for both schemas."""
    place = registry.LockPlace("app", "public", "ops", "schema_migrations")
    keys = registry.get("golang-migrate").advisory_locks(place)
    assert keys == (go_advisory_lock_id("ops", "schema_migrations", "/app"),
                    go_advisory_lock_id("ops", "schema_migrations", "app"),
                    1726534663, 1787120056, CODER_LOCK)


def test_flyway_key_is_its_magic_number_plus_the_tables_hash_code():
    """public.flyway_schema_history: 77431708279161 + hashCode of the quoted name."""
    place = registry.LockPlace("app", "public", "public", "flyway_schema_history")
    assert registry.get("flyway").advisory_locks(place) == (77433833903597,)
    assert flyway_lock_key("public", "flyway_schema_history") == 77433833903597


def test_java_hash_code_is_signed_32_bit_over_utf16():
    """Java's String.hashCode: known values, negative ones, and a character beyond the BMP."""
    assert java_hash_code("") == 0
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("polygenelubricants") == -2147483648
    assert java_hash_code("\U0001f600") == 1772899  # two UTF-16 units: 0xD83D, 0xDE00


@pytest.mark.parametrize(("name", "keys"), [
    ("prisma", (72707369,)), ("tern", (9628173550095224,)), ("goose", (4097083626,)),
    ("dbmate", ()), ("diesel", ()), ("sql-migrate", ()), ("pgsteady", ())])
def test_fixed_keys_and_tools_without_a_lock(name, keys):
    """Prisma, tern and goose use one constant key; dbmate, Diesel and sql-migrate take none."""
    assert registry.get(name).advisory_locks(APP) == keys


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_layout_says_how_its_tool_locks(name):
    """Each layout's module declares its tool's locks itself (none is a choice, not a gap)."""
    tool = registry.get(name)
    assert "advisory_locks" in type(tool).__dict__
    assert type(tool).advisory_locks.__doc__
