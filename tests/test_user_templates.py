"""A user's templates_dir: HTML escaped by name on every path, drift's own reachable as
`default:NAME`, and a broken template one line naming its file."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_drift

from drift.render.jinja import make_environment, render_report, render_template

EVIL = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.mark.parametrize("name", ["mine.html.j2", "mine.htm.j2", "mine.html", "report.html.j2"])
def test_a_user_html_template_is_escaped_whichever_path_renders_it(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_text("<p>{{ host }}</p>\n")
    env = make_environment(str(tmp_path))
    assert env.get_template(name).render(host=EVIL) == f"<p>{ESCAPED}</p>\n"
    assert render_template(name, {"host": EVIL}, str(tmp_path)) == f"<p>{ESCAPED}</p>\n"
    assert make_environment(str(tmp_path), color=True).get_template(name).render(host=EVIL) == (
        f"<p>{ESCAPED}</p>\n"
    )
    if name == "report.html.j2":
        assert render_report({"host": EVIL}, "html", str(tmp_path)) == f"<p>{ESCAPED}</p>\n"


def test_text_and_markdown_templates_are_not_html_escaped(tmp_path: Path) -> None:
    (tmp_path / "since.txt.j2").write_text("{{ host }}\n")
    (tmp_path / "report.md.j2").write_text("{{ host }}\n")
    assert render_template("since.txt.j2", {"host": EVIL}, str(tmp_path)) == f"{EVIL}\n"
    assert render_report({"host": EVIL}, "md", str(tmp_path)) == f"{EVIL}\n"


def test_every_printed_value_is_shown_as_printable_without_a_filter(tmp_path: Path) -> None:
    (tmp_path / "mine.txt.j2").write_text("[{{ value }}] [{{ value | paint('title') }}]\n")
    out = render_template("mine.txt.j2", {"value": "a\nb\x1b[31mc\u202e"}, str(tmp_path))
    assert out == "[a\\nbc\\u202e] [a\\nbc\\u202e]\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two records whose command output changed; a config whose host needs escaping in HTML."""
    tmp_path = tmp_path_factory.mktemp("templates")
    (tmp_path / "v").write_text("1\n")
    config = tmp_path / "drift.toml"
    base = f'host = "web<b>"\n[[commands]]\nname = "v"\nrun = "cat {tmp_path}/v"\n'
    config.write_text(base)
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    (tmp_path / "v").write_text("2\n")
    run_drift(["record", *cfg], tmp_path)
    return {"tmp": tmp_path, "config": config, "base": base, "cfg": cfg}


def with_templates(history: dict, files: dict[str, str], folder: str) -> Path:
    """A templates_dir holding `files`, named in the history's drift.toml."""
    mine = history["tmp"] / folder
    mine.mkdir()
    for name, text in files.items():
        (mine / name).write_text(text)
    history["config"].write_text(f'templates_dir = "{mine}"\n' + history["base"])
    return mine


def report(history: dict, name: str, check: bool = True) -> tuple[str, str]:
    """`drift report -o NAME` on the history: (what it wrote, its stderr)."""
    target = history["tmp"] / name
    target.unlink(missing_ok=True)
    args = ["report", "--stable", "#1", "-o", str(target), *history["cfg"]]
    result = run_drift(args, history["tmp"], check=check)
    return (target.read_text() if target.exists() else "", result.stderr)


def test_a_user_report_extends_drift_s_own_and_overrides_one_block(history: dict) -> None:
    history["config"].write_text(history["base"])
    own, _ = report(history, "own.html")
    own_md, _ = report(history, "own.md")
    with_templates(
        history,
        {
            "report.html.j2": '{% extends "default:report.html.j2" %}\n'
            '{% block footer %}<footer id="rota">on call for {{ host }}: '
            "{{ value(suspects[0].title) }}</footer>\n{% endblock %}\n",
            "report.md.j2": '{% extends "default:report.md.j2" %}\n'
            "{% block regenerate %}On call for {{ host | code }}.\n{% endblock %}\n",
        },
        "extends",
    )
    mine, _ = report(history, "mine.html")
    head = own.split("<footer")[0]
    assert mine.startswith(head) and "web&lt;b&gt;" in head  # everything else is drift's own
    footer = mine.removeprefix(head)
    assert footer == (
        '<footer id="rota">on call for web&lt;b&gt;: <code class="value">'
        "command v: output modified</code></footer>\n</body>\n</html>\n"
    )
    mine_md, _ = report(history, "mine.md")
    assert mine_md == own_md.split("## Regenerate")[0] + "On call for `web<b>`.\n"


def test_a_broken_block_of_a_user_template_is_one_line_naming_it(history: dict) -> None:
    mine = with_templates(
        history,
        {
            "report.html.j2": '{% extends "default:report.html.j2" %}\n'
            "{% block footer %}\n<footer>{{ on_call_rota }}</footer>\n{% endblock %}\n"
        },
        "broken",
    )
    written, stderr = report(history, "broken.html", check=False)
    assert written == ""
    assert stderr == (
        f"drift: {mine / 'report.html.j2'}:3: template error: 'on_call_rota' is undefined\n"
    )


def test_a_template_edited_between_runs_renders_as_edited_not_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled templates are cached between runs in the user's cache folder; an edit (same
    size, same second) is compiled again, because the cache is keyed by the source."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "mine"
    folder.mkdir()
    template = folder / "note.txt.j2"
    template.write_text("before {{ value }}\n")
    assert render_template("note.txt.j2", {"value": 1}, str(folder)) == "before 1\n"
    cached = tmp_path / "cache" / "drift" / "templates"
    assert (cached.stat().st_mode & 0o777) == 0o700
    assert any(cached.iterdir())  # the compiled template is kept
    template.write_text("after! {{ value }}\n")
    assert render_template("note.txt.j2", {"value": 1}, str(folder)) == "after! 1\n"


def test_a_cache_folder_others_can_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shared = tmp_path / "cache" / "drift" / "templates"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    assert make_environment().bytecode_cache is None
    assert render_template("note.txt.j2", {"value": 2}, str(_note(tmp_path))) == "n 2\n"
    assert list(shared.iterdir()) == []


def _note(tmp_path: Path) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "note.txt.j2").write_text("n {{ value }}\n")
    return folder
