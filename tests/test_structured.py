"""Structured diffs of kept config files: real files read by the real collector, then diffed."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.structured import ContentDiff, KeyChange, diff_content
from drift.collectors.files import collect_files
from drift.config import FileSpec
from drift.facts import CollectContext, CollectionError, Fact


def recorded(path: Path, fmt: str) -> tuple[str, str]:
    """The content fact the collector records for `path`, and the format in its provenance."""
    spec = FileSpec("cfg", (str(path),), content=True, format=fmt)
    items = list(collect_files(spec, CollectContext()))
    assert not [i for i in items if isinstance(i, CollectionError)]
    (fact,) = [i for i in items if isinstance(i, Fact) and i.key == "content"]
    return fact.value, fact.provenance["format"]


def edit_and_diff(path: Path, before: str, after: str, fmt: str) -> ContentDiff:
    """Write `before`, record it, write `after`, record it, and diff the two recorded texts."""
    path.write_text(before)
    old, _ = recorded(path, fmt)
    path.write_text(after)
    new, recorded_fmt = recorded(path, fmt)
    return diff_content(old, new, recorded_fmt)


def test_json_port_change_and_added_key_are_named(tmp_path: Path) -> None:
    before = {"server": {"host": "0.0.0.0", "port": 8000}, "model": "llama-3-8b"}
    after = {
        "server": {"host": "0.0.0.0", "port": 8001},
        "model": "llama-3-8b",
        "max_batch": 64,
    }
    diff = edit_and_diff(
        tmp_path / "serve.json", json.dumps(before, indent=2), json.dumps(after, indent=2), "json"
    )
    assert diff.format == "json"
    assert diff.parse_error is None
    assert diff.key_changes == (
        KeyChange("max_batch", "added", None, "64"),
        KeyChange("server.port", "changed", "8000", "8001"),
    )
    assert '-    "port": 8000' in diff.unified
    assert '+    "port": 8001' in diff.unified


def test_yaml_nested_list_item_change_names_its_index(tmp_path: Path) -> None:
    before = "workers:\n  - name: prefill\n    gpus: 4\n  - name: decode\n    gpus: 4\n"
    after = "workers:\n  - name: prefill\n    gpus: 4\n  - name: decode-v2\n    gpus: 4\n"
    diff = edit_and_diff(tmp_path / "cluster.yaml", before, after, "yaml")
    assert diff.parse_error is None
    assert diff.key_changes == (KeyChange("workers[1].name", "changed", '"decode"', '"decode-v2"'),)


def test_toml_table_change_removed_key_and_type_change(tmp_path: Path) -> None:
    before = '[server]\nport = 8000\ntimeout = 30\n\n[cache]\nsize = "4G"\n'
    after = '[server]\nport = "8000"\n\n[cache]\nsize = "8G"\n'
    diff = edit_and_diff(tmp_path / "app.toml", before, after, "toml")
    assert diff.key_changes == (
        KeyChange("cache.size", "changed", '"4G"', '"8G"'),
        KeyChange("server.port", "type", "8000", '"8000"'),
        KeyChange("server.timeout", "removed", "30", None),
    )


def test_invalid_json_after_an_edit_falls_back_to_the_unified_diff(tmp_path: Path) -> None:
    before = '{\n  "port": 8000,\n  "host": "a"\n}\n'
    after = '{\n  "port": 8001\n  "host": "a"\n}\n'  # the comma went missing
    diff = edit_and_diff(tmp_path / "serve.json", before, after, "json")
    assert diff.key_changes == ()
    assert diff.parse_error is not None
    assert diff.parse_error.startswith("after: invalid JSON: Expecting ',' delimiter: line 3")
    assert "\n" not in diff.parse_error
    assert diff.unified == (
        "--- before",
        "+++ after",
        "@@ -1,3 +1,3 @@",
        " {",
        '-  "port": 8000,',
        '+  "port": 8001',
        '   "host": "a"',
    )


def test_invalid_yaml_error_is_one_line_with_a_position(tmp_path: Path) -> None:
    diff = edit_and_diff(tmp_path / "c.yaml", "a: 1\n", "a: [1\nb: 2\n", "yaml")
    assert (
        diff.parse_error
        == "after: invalid YAML: expected ',' or ']', but got ':' (line 2, column 2)"
    )
    assert diff.unified[-2:] == ("+a: [1", "+b: 2")


def test_text_file_gets_a_unified_diff_with_one_line_of_context(tmp_path: Path) -> None:
    before = "".join(f"line {i}\n" for i in range(10))
    after = before.replace("line 5\n", "line five\n")
    diff = edit_and_diff(tmp_path / "hosts", before, after, "text")
    assert diff == ContentDiff(
        "text",
        (),
        (
            "--- before",
            "+++ after",
            "@@ -5,3 +5,3 @@",
            " line 4",
            "-line 5",
            "+line five",
            " line 6",
        ),
        None,
    )


def test_long_diffs_are_cut_and_long_values_shortened() -> None:
    before = "\n".join(f"a{i}" for i in range(300))
    after = "\n".join(f"b{i}" for i in range(300))
    unified = diff_content(before, after, "text").unified
    assert len(unified) == 201
    assert unified[-1] == "... 403 more lines"  # 3 header lines + 600 changed - 200 shown

    big = json.dumps({"blob": "x" * 500})
    (change,) = diff_content(big, json.dumps({"blob": "y" * 500}), "json").key_changes
    assert change.before is not None and change.after is not None
    assert len(change.before) == 120 and change.before.endswith("…")
    assert change.after.startswith('"yyyy')


def test_awkward_keys_are_quoted_and_list_indices_stay_numeric() -> None:
    before = {"a.b": {"my key": 1}, "": 0, "w": list(range(12))}
    after = {"a.b": {"my key": 2}, "": 1, "w": [*range(10), 99, 11]}
    diff = diff_content(json.dumps(before), json.dumps(after), "json")
    assert [(c.path, c.kind) for c in diff.key_changes] == [
        ('""', "changed"),
        ('"a.b"."my key"', "changed"),
        ("w[10]", "changed"),
    ]


def test_yaml_integer_keys_read_as_keys_not_indices_and_the_root_can_change() -> None:
    diff = diff_content("ports:\n  8080: web\n", "ports:\n  8080: api\n", "yaml")
    assert diff.key_changes == (KeyChange("ports.8080", "changed", '"web"', '"api"'),)
    (root,) = diff_content("[1]", '{"a": 1}', "json").key_changes
    assert (root.path, root.kind) == ("(root)", "type")


def test_a_boolean_in_a_list_turned_number_is_a_type_change() -> None:
    # In Python True == 1, so a list diff by equality alone would see nothing here.
    (change,) = diff_content('{"gpus": [true, 2]}', '{"gpus": [1, 2]}', "json").key_changes
    assert (change.path, change.kind, change.before, change.after) == (
        "gpus[0]",
        "type",
        "true",
        "1",
    )
    (flip,) = diff_content("[false, 0]", "[true, 0]", "json").key_changes
    assert (flip.path, flip.kind, flip.before, flip.after) == ("[0]", "changed", "false", "true")


def test_a_missing_side_gives_only_the_unified_diff() -> None:
    added = diff_content(None, '{"a": 1}\n', "json")
    assert added.key_changes == () and added.parse_error is None
    assert added.unified[-1] == '+{"a": 1}'
    gone = diff_content('{"a": 1}\n', None, "json")
    assert gone.unified[-1] == '-{"a": 1}'


def test_unknown_format_is_diffed_as_text() -> None:
    diff = diff_content("a = 1\n", "a = 2\n", "ini")
    assert diff.key_changes == () and diff.parse_error is None
    assert diff.unified[-2:] == ("-a = 1", "+a = 2")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_json_values, _json_values)
def test_key_changes_are_empty_exactly_when_the_documents_are_equal(a: object, b: object) -> None:
    diff = diff_content(json.dumps(a), json.dumps(b), "json")
    # sort_keys: key order is not a change; a JSON dump also tells true from 1.
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (diff.key_changes == ()) == same
    assert diff_content(json.dumps(a), json.dumps(a), "json") == ContentDiff("json", (), (), None)
