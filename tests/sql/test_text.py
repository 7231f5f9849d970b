"""The SQL scanner: statements split as psql does, and secrets masked in every literal form."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pgsteady.sql import text as sqltext

SECRETS = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                         blacklist_characters="\x00"), min_size=1, max_size=40)
PREFIXES = ["ALTER ROLE app PASSWORD ", "create user \"we'ird\" with encrypted password ",
            "ALTER USER u PASSWORD /* set it */ ", "CREATE ROLE r LOGIN PASSWORD\n  "]
SUFFIXES = ["", ";", " VALID UNTIL 'infinity'", " -- done\n", "; SELECT 'x'"]


def standard(secret: str) -> str:
    return "'" + secret.replace("'", "''") + "'"


def escape(secret: str) -> str:
    body = secret.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return "E'" + body + "'"


def unicode_escape(secret: str) -> str:
    out = []
    for i, ch in enumerate(secret):
        if ch == "'":
            out.append("''")
        elif ch == "\\":
            out.append("\\\\")
        elif i % 2 or ord(ch) > 0xFFFF:
            out.append(f"\\+{ord(ch):06X}")
        else:
            out.append(f"\\{ord(ch):04X}")
    return "U&'" + "".join(out) + "'"


def dollar(secret: str) -> str:
    tag = "q"
    while f"${tag}$" in secret or (secret + "$").startswith(f"{tag}$") or \
            secret.endswith("$" + tag):
        tag += "q"
    return f"${tag}${secret}${tag}$"


FORMS = [standard, escape, unicode_escape, dollar]


@settings(max_examples=300, deadline=None)
@given(secret=SECRETS, form=st.sampled_from(FORMS), prefix=st.sampled_from(PREFIXES),
       suffix=st.sampled_from(SUFFIXES))
def test_password_literal_masked_in_every_form(secret, form, prefix, suffix):
    """Whatever the literal form and content, exactly the literal is replaced by '***'."""
    query = prefix + form(secret) + suffix
    assert sqltext.mask_secret_literals(query) == prefix + "'***'" + suffix


@settings(max_examples=300, deadline=None)
@given(secret=SECRETS, form=st.sampled_from(FORMS), prefix=st.sampled_from(PREFIXES),
       cut=st.integers(min_value=1, max_value=200))
def test_literal_cut_short_is_still_masked(secret, form, prefix, cut):
    """A query truncated inside the literal (as pg_stat_activity truncates) shows none of it."""
    literal = form(secret)
    opening = literal.index("$", 1) + 1 if form is dollar else literal.index("'") + 1
    cut = min(len(literal), opening + cut - 1)
    masked = sqltext.scrub(prefix + literal[:cut])
    # A cut can make one literal read as two ('a''b' cut after ''): both are masked.
    assert masked.startswith(prefix + "'***'")
    assert masked[len(prefix):].replace("'***'", "") == ""


@settings(max_examples=200, deadline=None)
@given(secret=SECRETS.filter(lambda s: len(s.strip()) >= 6), limit=st.integers(1, 120))
def test_mask_before_cut(secret, limit):
    """Cutting after scrubbing never shows part of the secret."""
    query = "ALTER ROLE app PASSWORD " + standard(secret) + " LOGIN"
    # A secret that begins like the query's own words ("ALTER 0") proves nothing either way.
    assume(secret[:6] not in query.replace(standard(secret), ""))
    shown = sqltext.shorten(sqltext.scrub(query), limit)
    assert secret not in shown and secret[:6] not in shown.replace("'***'", "")


def test_literal_forms_are_what_postgresql_reads(pgsteady_database):
    """The fuzzer's literal forms are real: the server decodes each to the secret."""
    tricky = ["plain", "it's", "back\\slash\\'", "dollar$q$tag", "new\nline", "ünï©ødé 🔑",
              "''", "\\\\'", "$$"]
    with psycopg.connect(pgsteady_database.dsn) as conn:
        for secret in tricky:
            for form in FORMS:
                literal = form(secret)
                row = conn.execute(f"SELECT {literal}").fetchone()  # type: ignore[call-overload]
                assert row == (secret,), (form.__name__, literal)


@pytest.mark.parametrize(("text", "expected"), [
    ("select 1; select 2", ["select 1", " select 2"]),
    ("select ';'; select $$;$$; select $a$ $$; $a$", ["select ';'", " select $$;$$",
                                                       " select $a$ $$; $a$"]),
    ("select E'\\';'; select 1", ["select E'\\';'", " select 1"]),
    ('select ";"; /* ; /* nested ; */ ; */ select 1', ['select ";"',
                                                         " /* ; /* nested ; */ ; */ select 1"]),
    ("select 1 -- ; comment\n; select 2", ["select 1 -- ; comment\n", " select 2"]),
    ("create function f() returns int language sql begin atomic select 1; select 2; end; "
     "select 3", ["create function f() returns int language sql begin atomic select 1; "
                  "select 2; end", " select 3"]),
    ("select a$b, $1; select 2", ["select a$b, $1", " select 2"]),
    ("select 1 -- c\r; select 2", ["select 1 -- c\r", " select 2"]),
])
def test_split_like_psql(text, expected):
    """Semicolons inside literals, identifiers, comments and routine bodies do not split."""
    assert [c.text for c in sqltext.split(text)] == expected


def test_split_positions():
    """Each chunk knows its line and column in the file."""
    chunks = list(sqltext.split("select 1;\n\n  select 2; select\n3"))
    assert [(c.line, c.col) for c in chunks] == [(1, 1), (1, 10), (3, 12)]


def test_template_placeholders_become_names_of_the_same_length():
    """{{ ... }} and ${...} outside quoted literals (dollar-quoted bodies are code: a DO
    block's) become padded names (never a keyword); literals and positions stay."""
    text = ("CREATE INDEX i ON {{ index .Options \"Namespace\" }}.users (id);\n"
            "SELECT '{{1,2}}'::int[], '${x}', $$ {{ a }} $$ FROM ${schema}.t, {{.User}}.u;\n")
    filled, names = sqltext.fill_placeholders(text)
    assert len(filled) == len(text)
    assert [filled.index(n) for n in names] == [
        text.index("{{ index"), text.index("{{ a"), text.index("${schema"), text.index("{{.User")]
    assert names[0].startswith("namespace___") and names[3].startswith("user___")
    assert "'{{1,2}}'" in filled and "'${x}'" in filled and "$$ a______ $$" in filled
    assert [sqltext.placeholder_shown(n) for n in names] == \
        ["{{namespace}}", "{{a}}", "{{schema}}", "{{user}}"]
    assert sqltext.fill_placeholders("SELECT 1;") == ("SELECT 1;", ())


def test_a_line_comment_ends_at_a_carriage_return_as_postgresql_ends_it(pgsteady_database):
    """PostgreSQL ends a ``--`` comment at a lone carriage return too (files saved with old
    Mac line ends): the server reads ``-- c\\r+ 1`` as a comment then ``+ 1``, and the
    helpers that skip comments agree."""
    with psycopg.connect(pgsteady_database.dsn) as conn:
        assert conn.execute("SELECT 1 -- c\r+ 1").fetchone() == (2,)
    assert sqltext.skip_blanks("-- c\rSELECT") == len("-- c\r")
    assert sqltext.skip_blanks("-- c\r\nSELECT") == len("-- c\r\n")
    assert sqltext.skip_blanks("-- c\nSELECT") == len("-- c\n")
    assert sqltext.skip_blanks("-- c") == len("-- c")
