"""The change-only store: versions only for changes, state read back exactly, cheap records."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.errors import NoDatabaseError
from drift.facts import CollectionError, Fact, FactBlock
from drift.store.db import connect_dbapi
from drift.store.delta import FRESH_MIN
from drift.store.digest import state_digest
from drift.store.query import History
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter, add_mark, now_us

HOST = "test-host"


def write(
    db_path: Path,
    facts: list[Fact | FactBlock],
    errors: list[CollectionError] | None = None,
    at: int | None = None,
) -> int:
    db = resolve_db_url(str(db_path))
    with HistoryWriter.open(db) as writer:
        return writer.write_snapshot(HOST, at or now_us(), facts, errors or [], {}).snapshot_id


def count(db_path: Path, table: str) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def state(db_path: Path, snapshot: int) -> dict[tuple[str, str], str]:
    with History.open(resolve_db_url(str(db_path)), HOST) as history:
        return {
            ident: (history.text(v) if not v.secret else "secret")
            for ident, v in history.state_at(snapshot).items()
        }


facts_strategy = st.dictionaries(
    st.tuples(
        st.sampled_from(["service:decode", "script:/s.sh", "file:/k.py"]),
        st.text("abcdefgh:_", min_size=1, max_size=6),
    ),
    st.one_of(st.text(max_size=20), st.text(min_size=600, max_size=700)),
    max_size=12,
).map(lambda d: [Fact(s, k, v) for (s, k), v in d.items()])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=facts_strategy, second=facts_strategy)
def test_state_read_back_equals_what_was_recorded_and_same_state_adds_no_versions(
    tmp_path_factory, first: list[Fact], second: list[Fact]
) -> None:
    db = tmp_path_factory.mktemp("db") / "drift.db"
    s1 = write(db, first)
    s2 = write(db, second)
    versions = count(db, "versions")
    s3 = write(db, second)
    assert count(db, "versions") == versions, "recording the same state twice added versions"
    assert state(db, s1) == {(f.subject, f.key): f.value for f in first}
    assert state(db, s2) == {(f.subject, f.key): f.value for f in second}
    assert state(db, s3) == state(db, s2)


def test_failed_collection_keeps_the_last_value_instead_of_removing(tmp_path: Path) -> None:
    db = tmp_path / "drift.db"
    env = [
        Fact("service:decode", "env:A", "1"),
        Fact("service:decode", "env:B", "2"),
        Fact("service:decode", "pid", "10"),
    ]
    write(db, env)
    err = CollectionError("service:decode", "env:", "permission denied reading environment")
    s2 = write(db, [Fact("service:decode", "pid", "10")], [err])
    assert state(db, s2) == {
        ("service:decode", "env:A"): "1",
        ("service:decode", "env:B"): "2",
        ("service:decode", "pid"): "10",
    }
    # without the error, the same input is a real removal
    s3 = write(db, [Fact("service:decode", "pid", "10")])
    assert state(db, s3) == {("service:decode", "pid"): "10"}


def test_long_values_are_stored_once_as_compressed_blobs(tmp_path: Path) -> None:
    db = tmp_path / "drift.db"
    script = "#!/bin/bash\n" + "export A=1\n" * 200
    write(db, [Fact("script:/a.sh", "content", script), Fact("script:/b.sh", "content", script)])
    assert count(db, "blobs") == 1
    with sqlite3.connect(db) as conn:
        size = conn.execute("SELECT length(content) FROM blobs").fetchone()[0]
    assert size < len(script) / 10
    # A short text is stored inline, yet reads as a text (by its SHA-256) all the same;
    # one holding a NUL still goes to a blob (PostgreSQL's text cannot hold one).
    short, binary = "#!/bin/sh\n", "a\0b"
    s = write(
        db,
        [
            Fact("script:/a.sh", "content", short),
            Fact("script:/b.sh", "content", script),
            Fact("command:c", "stdout", binary),
        ],
    )
    assert count(db, "blobs") == 2
    with History.open(resolve_db_url(str(db)), HOST) as history:
        stored = history.state_at(s)
        for ident, text in (
            (("script:/a.sh", "content"), short),
            (("command:c", "stdout"), binary),
        ):
            version = stored[ident]
            sha = hashlib.sha256(text.encode()).hexdigest()
            assert (version.value, version.blob_sha256, history.text(version)) == (None, sha, text)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM versions WHERE value = ?", (short,)).fetchone()


def test_unchanged_record_adds_one_snapshot_row_and_under_200_bytes(tmp_path: Path) -> None:
    db = tmp_path / "drift.db"
    facts = [
        Fact(f"file:/opt/k/{i}.py", key, f"{key}-{i}")
        for i in range(500)
        for key in ("sha256", "size", "mode")
    ]
    write(db, facts)
    for _ in range(20):  # warm up: fill the pages the first records touch
        write(db, facts)
    tables = {t: count(db, t) for t in ("versions", "facts", "blobs")}
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = os.path.getsize(db)
    n = 300
    for _ in range(n):
        write(db, facts)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    growth = (os.path.getsize(db) - before) / n
    assert {t: count(db, t) for t in tables} == tables
    assert growth <= 200, f"{growth:.0f} bytes per unchanged record"


def test_state_at_uses_the_covering_index(tmp_path: Path) -> None:
    db = tmp_path / "drift.db"
    write(db, [Fact("service:decode", "pid", "1")])
    with History.open(resolve_db_url(str(db)), HOST) as history:
        sql, params = history.state_sql(1)
        plan = history.conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    details = [row[-1] for row in plan]
    assert any("USING COVERING INDEX ix_versions_fact_first" in d for d in details), details
    assert not any(d.startswith("SCAN versions") for d in details), details


def test_same_facts_in_another_order_are_still_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "drift.db"
    facts = [Fact("service:decode", f"env:V{i}", str(i)) for i in range(50)]
    write(db, facts)
    versions = count(db, "versions")
    s2 = write(db, list(reversed(facts)))  # digest differs: the full comparison runs
    assert count(db, "versions") == versions
    assert state(db, s2) == {(f.subject, f.key): f.value for f in facts}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT n_changed FROM snapshots WHERE id = ?", (s2,)).fetchone() == (
            0,
        )


@given(
    files=st.dictionaries(
        st.text("ab/\0", min_size=1, max_size=4).map(lambda p: "file:/" + p),
        st.text("0123\0", max_size=3),
        min_size=1,
        max_size=8,
    ),
    data=st.data(),
)
def test_the_state_digest_does_not_depend_on_how_files_are_split_into_blocks(
    files: dict[str, str], data: st.DataObject
) -> None:
    def block(subjects: list[str]) -> FactBlock:
        return FactBlock(
            ("sha256",), subjects, [[files[s] for s in subjects]], [{}] * len(subjects)
        )

    subjects = sorted(files)
    read = data.draw(st.lists(st.sampled_from(subjects), unique=True))
    rest = [s for s in subjects if s not in read]
    whole = state_digest([block(subjects)])
    assert state_digest([block(read), block(rest)]) == whole
    assert state_digest([block(list(reversed(subjects)))]) == whole
    # Anything stored differently digests differently.
    changed = dict(files, **{subjects[0]: files[subjects[0]] + "x"})
    assert state_digest([block(subjects)]) != state_digest(
        [FactBlock(("sha256",), subjects, [[changed[s] for s in subjects]], [{}] * len(subjects))]
    )
    assert state_digest([block(subjects)]) != state_digest(
        [FactBlock(("size",), subjects, [[files[s] for s in subjects]], [{}] * len(subjects))]
    )


def test_the_record_after_a_change_reads_no_stored_value(tmp_path: Path) -> None:
    # The files collector yields the files it read in one block and those its stat
    # cache vouches for in another: a changed file is in the first at its record and
    # in the second at the next, with nothing changed. That must be the digest's
    # shortcut, not a comparison of every stored value.
    db = resolve_db_url(str(tmp_path / "drift.db"))
    files = {f"file:/srv/{i:02d}": (f"{i:064x}", str(i)) for i in range(40)}

    def block(subjects: list[str]) -> FactBlock:
        return FactBlock(
            ("sha256", "size"),
            subjects,
            [[files[s][0] for s in subjects], [files[s][1] for s in subjects]],
            [{"glob": "/srv/*"} for _ in subjects],
        )

    def record(items: list[Fact | FactBlock]) -> tuple[int, int, list[str]]:
        with HistoryWriter.open(db) as writer:
            statements: list[str] = []
            writer.conn.raw.set_trace_callback(statements.append)
            result = writer.write_snapshot(HOST, now_us(), items, [], {})
        reads = [s for s in statements if s.startswith("SELECT") and "versions" in s]
        return result.changed, result.values_read, reads

    command = Fact("command:load", "stdout", "0.1\n", {"run": "cat /proc/loadavg"})
    assert record([block(sorted(files)), command])[:2] == (81, 0)
    assert record([block(sorted(files)), command]) == (0, 0, [])
    files["file:/srv/07"] = ("f" * 64, "7")
    read, cached = ["file:/srv/07"], [s for s in sorted(files) if s != "file:/srv/07"]
    changed, values_read, reads = record([block(read), block(cached), command])
    assert (changed, values_read) == (1, 81) and reads
    assert record([block(sorted(files)), command]) == (0, 0, [])
    # A file the collector had to read again (touched, same bytes) is no change either.
    assert record([block(read), block(cached), command]) == (0, 0, [])
    # And the digest still tells the state apart, whatever the blocks.
    files["file:/srv/08"] = ("e" * 64, "8")
    assert record([block(sorted(files)), command])[0] == 1


files_strategy = st.dictionaries(
    st.text("abc/._-", min_size=1, max_size=8).map(lambda p: "file:/" + p),
    st.tuples(
        st.text("0123456789abcdef", min_size=1, max_size=8), st.sampled_from(["0644", "0600"])
    ),
    max_size=10,
)


def as_block(files: dict[str, tuple[str, str]]) -> FactBlock:
    subjects = sorted(files)
    return FactBlock(
        ("sha256", "size", "mode"),
        subjects,
        [
            [files[s][0] for s in subjects],
            [str(len(s)) for s in subjects],
            [files[s][1] for s in subjects],
        ],
        [{} for _ in subjects],
    )


def as_facts(files: dict[str, tuple[str, str]]) -> list[Fact]:
    return [
        Fact(s, key, value)
        for s in sorted(files)
        for key, value in (("sha256", files[s][0]), ("size", str(len(s))), ("mode", files[s][1]))
    ]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=files_strategy, second=files_strategy, loose_first=st.booleans())
def test_a_fact_block_stores_exactly_the_facts_it_holds(
    tmp_path_factory,
    first: dict[str, tuple[str, str]],
    second: dict[str, tuple[str, str]],
    loose_first: bool,
) -> None:
    # Cached files come as a block, read ones as Facts: the same files either
    # way are the same state, and a changed one is a change either way.
    db = tmp_path_factory.mktemp("db") / "drift.db"
    env = [Fact("service:decode", "env:MODE", "fast")]
    s1 = write(db, env + (as_facts(first) if loose_first else [as_block(first)]))
    versions = count(db, "versions")
    s2 = write(db, env + ([as_block(first)] if loose_first else as_facts(first)))
    assert count(db, "versions") == versions, "the same files as a block added versions"
    s3 = write(db, [*env, as_block(second)])
    expected = {(f.subject, f.key): f.value for f in env + as_facts(second)}
    assert state(db, s3) == expected
    assert state(db, s1) == state(db, s2)
    s4 = write(db, [*env, as_block(second)])
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT n_changed, n_facts FROM snapshots WHERE id = ?", (s4,)
        ).fetchone() == (
            0,
            len(expected),
        )


def test_a_large_first_record_reads_back_whole(tmp_path: Path) -> None:
    # More facts than one multi-row INSERT holds, and not a multiple of it,
    # with blob-sized values among them: every one must come back.
    db = tmp_path / "drift.db"
    facts = [
        Fact(f"file:/srv/{i:05d}.py", key, f"{key}-{i}" * (200 if i % 97 == 0 else 1))
        for i in range(2_345)
        for key in ("sha256", "size", "mode")
    ]
    snapshot = write(db, list(facts))
    assert state(db, snapshot) == {(f.subject, f.key): f.value for f in facts}
    assert count(db, "facts") == count(db, "versions") == len(facts)


def test_insert_rows_keeps_under_the_sqlite_variable_limit(tmp_path: Path) -> None:
    # An SQLite built with a low limit on bound values still takes every row.
    conn = connect_dbapi(resolve_db_url(str(tmp_path / "t.db")), create=True)
    try:
        conn.execute("CREATE TABLE t (a INTEGER, b TEXT, c TEXT)")
        conn.raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 10)
        rows = [(i, f"b{i}", None) for i in range(1_001)]
        conn.insert_rows("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", rows)
        assert conn.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == rows
    finally:
        conn.close()


def file_block(paths: list[str], tag: str, provenance: dict[str, str] | None = None) -> FactBlock:
    """A block of regular files as the files collector yields it, values marked with `tag`."""
    subjects = [f"file:{p}" for p in paths]
    shared = provenance if provenance is not None else {"glob": "/srv/**", "set": "srv"}
    return FactBlock(
        ("sha256", "size", "mode"),
        subjects,
        [[f"{tag}-{p}" for p in paths], [str(len(p)) for p in paths], ["0644"] * len(paths)],
        [shared] * len(paths),
    )


def test_a_first_record_of_blocks_reads_back_whole_and_the_first_set_wins(
    tmp_path: Path,
) -> None:
    # A first record stores its blocks column-wise. Two globs of two sets
    # match the same files and a loose fact repeats one: the first wins, a
    # fact of another key stays, and each fact is stored once.
    db = tmp_path / "drift.db"
    paths = [f"/srv/{i:05d}.py" for i in range(2_345)]
    first = file_block(paths[:1_500], "a", {"glob": "/srv/0*", "set": "one"})
    second = file_block(paths[1_500:], "a", {"glob": "/srv/**", "set": "one"})
    overlap = file_block(paths[1_000:], "b", {"glob": "/srv/**", "set": "two"})
    loose = [
        Fact("file:/srv/00001.py", "sha256", "loose"),  # already in `first`: dropped
        Fact("file:/srv/00001.py", "content", "print(1)\n"),  # another key: kept
    ]
    env = Fact("service:decode", "env:MODE", "fast")
    snapshot = write(db, [env, first, second, *loose, overlap])
    expected = {(f.subject, f.key): f.value for f in [*first, *second]}
    expected[("file:/srv/00001.py", "content")] = "print(1)\n"
    expected[("service:decode", "env:MODE")] = "fast"
    assert state(db, snapshot) == expected
    assert count(db, "facts") == count(db, "versions") == len(expected)
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT n_facts, n_changed FROM snapshots WHERE id = ?", (snapshot,)
        ).fetchone()
        provenances = dict(
            conn.execute(
                "SELECT f.subject, p.content FROM facts f JOIN versions v ON v.fact_id = f.id "
                "JOIN provenances p ON p.id = v.provenance_id "
                "WHERE f.key = 'size' AND f.subject IN ('file:/srv/00000.py', 'file:/srv/02344.py')"
            ).fetchall()
        )
    assert row == (len(expected), len(expected))
    assert provenances == {
        "file:/srv/00000.py": '{"glob": "/srv/0*", "set": "one"}',
        "file:/srv/02344.py": '{"glob": "/srv/**", "set": "one"}',
    }
    # Recorded again, the same state adds nothing.
    again = write(db, [env, first, second, *loose, overlap])
    assert count(db, "versions") == len(expected)
    assert state(db, again) == expected


def test_many_new_files_on_a_known_host_reuse_the_ids_of_files_seen_before(
    tmp_path: Path,
) -> None:
    # Past FRESH_MIN new files an established host's blocks go in column-wise
    # too; files that were removed and came back keep their facts, so their
    # history runs on.
    db = tmp_path / "drift.db"
    old = [f"/srv/old/{i:04d}.py" for i in range(300)]
    new = [f"/srv/new/{i:04d}.py" for i in range(FRESH_MIN + 50)]
    write(db, [file_block(old, "v1")])
    write(db, [file_block(old[100:], "v1")])  # 100 removed
    back = write(db, [file_block(sorted(old + new), "v2")])
    assert state(db, back) == {
        (f.subject, f.key): f.value for f in file_block(sorted(old + new), "v2")
    }
    assert count(db, "facts") == 3 * (len(old) + len(new))
    with History.open(resolve_db_url(str(db)), HOST) as history:
        versions = history.versions_of("file:/srv/old/0000.py sha256")
    assert [(v.value, v.first_snapshot_id, v.until_snapshot_id) for v in versions] == [
        ("v1-/srv/old/0000.py", 1, 2),
        ("v2-/srv/old/0000.py", 3, None),
    ]


def test_a_block_whose_values_json_cannot_carry_is_stored_all_the_same(tmp_path: Path) -> None:
    # NUL ends a text inside SQLite's json_each and a long value belongs in a
    # blob: such a block is stored fact by fact, every value intact.
    db = tmp_path / "drift.db"
    block = file_block([f"/srv/{i}.bin" for i in range(5)], "x")
    block.columns[0][1] = "a\0b"
    block.columns[0][2] = "y" * 2_000
    snapshot = write(db, [block])
    assert state(db, snapshot) == {(f.subject, f.key): f.value for f in block}


def test_writer_and_history_close_on_leaving_a_with_block_or_on_close(tmp_path: Path) -> None:
    db = resolve_db_url(str(tmp_path / "drift.db"))
    with pytest.raises(RuntimeError), HistoryWriter.open(db) as writer:
        writer.write_snapshot(HOST, now_us(), [Fact("service:decode", "pid", "1")], [], {})
        raise RuntimeError("a failure inside the block still closes the writer")
    with pytest.raises(sqlite3.ProgrammingError):
        writer.conn.execute("SELECT 1")
    writer = HistoryWriter.open(db)
    writer.close()
    with pytest.raises(sqlite3.ProgrammingError):
        writer.conn.execute("SELECT 1")

    with History.open(db, HOST) as history:
        assert history.latest().n_facts == 1
        assert history.latest().n_facts == 1  # one connection, kept for the next query
    with pytest.raises(sqlite3.ProgrammingError):
        history.conn.execute("SELECT 1")
    history = History.open(db, HOST)
    history.latest()
    history.close()
    with pytest.raises(sqlite3.ProgrammingError):
        history.conn.execute("SELECT 1")


def test_a_mark_goes_through_the_writer_into_an_existing_history_only(tmp_path: Path) -> None:
    db = resolve_db_url(str(tmp_path / "drift.db"))
    with HistoryWriter.open(db) as writer:
        writer.write_snapshot(HOST, now_us(), [Fact("service:decode", "pid", "1")], [], {})
        first = writer.add_mark(HOST, "stable", 5, "decode answers")
        with pytest.raises(ValueError, match="unknown mark kind"):
            writer.add_mark(HOST, "fine", 6, None)
    assert add_mark(db, HOST, "note", 7, None) == first + 1
    with History.open(db, HOST) as history:
        assert [(m.kind, m.at_us, m.note) for m in history.marks()] == [
            ("stable", 5, "decode answers"),
            ("note", 7, None),
        ]
    missing = tmp_path / "none.db"
    with pytest.raises(NoDatabaseError):
        add_mark(resolve_db_url(str(missing)), HOST, "note", 1, None)
    assert not missing.exists()


@pytest.mark.parametrize(
    ("subject", "key"),
    [("service:decode", "unit:environment:KNOB"), ("script:/serve.sh", "export:KNOB")],
)
def test_a_record_whose_only_change_is_a_move_is_stored_not_skipped(
    tmp_path: Path, subject: str, key: str
) -> None:
    """The "nothing changed" shortcut compares places too: a moved line is a new version."""
    db = tmp_path / "drift.db"

    def at(line: int) -> list[Fact | FactBlock]:
        where = {"file": "/etc/x.service", "line": line, "text": "Environment=KNOB=1"}
        return [Fact(subject, key, "1", where), Fact("file:/k.py", "sha256", "ab")]

    write(db, at(6))
    write(db, at(7))  # only the line moved
    third = write(db, at(7))  # and now nothing did
    with History.open(resolve_db_url(str(db)), HOST) as history:
        lines = [v.provenance["line"] for v in history.versions_of(f"{subject} {key}")]
        assert sorted(lines) == [6, 7]
        assert history.counts_between(0, third) == {(subject, key): 1, ("file:/k.py", "sha256"): 1}
