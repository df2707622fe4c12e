"""What a collector's declaration gives the analysis and redaction, and what it refuses.

The analysis files a fact under its key's declared category and redaction
reads each key as declared ``never``, ``name`` or ``value``: a made-up kind
of subject gets both from its declaration alone, an undeclared key a clear
default, and a declaration redaction could not honour is refused by name.
"""

from __future__ import annotations

import pytest

from drift.declaration import Declarations, FactKey, SubjectKind
from drift.facts import Fact
from drift.secrets.redactor import Redactor
from drift.subjects import DECLARED, SUBJECT_KINDS

TOKEN = "hf_" + "DeclaredTokenShapedNotReal0123456789"

ACCEL = SubjectKind(
    "accel",
    "INDEX",
    "a made-up accelerator",
    (
        FactKey("clock", "its clock in MHz", "accel clock", "value"),
        FactKey("serial", "its serial number", "accel", "never"),
        FactKey("setting:", "one of its settings", "accel setting", "name", "NAME"),
        FactKey("setting:fan:", "one of its fan's settings", "accel fan", "name", "NAME"),
        FactKey("firmware:", "the SHA-256 of one of its firmware files", "accel", "never", "PATH"),
    ),
)


def secret(key: str, value: str, subject: str = "accel:0") -> bool:
    """Whether drift's redaction stores `value` of `key` as a secret."""
    (fact,) = Redactor(b"k" * 32).redact_facts([Fact(subject, key, value)])
    return fact.secret


def test_a_made_up_kind_is_filed_and_judged_as_declared() -> None:
    declared = Declarations((*SUBJECT_KINDS, ACCEL))
    assert declared.category("accel:0", "clock") == "accel clock"
    assert declared.category("accel:0", "setting:POWER_LIMIT") == "accel setting"
    assert declared.category("accel:0", "setting:fan:SPEED") == "accel fan"  # the longest prefix
    assert declared.category("accel:0", "firmware:/lib/accel.bin") == "accel"
    assert declared.category("accel:0", "colour") == "accel"  # undeclared: the kind's name
    assert [declared.secrecy(k) for k in ("clock", "serial", "firmware:/a", "setting:X")] == [
        "value",
        "never",
        "never",
        "name",
    ]
    assert declared.name_in_key("setting:API_TOKEN") == "API_TOKEN"
    assert declared.name_in_key("setting:fan:API_TOKEN") == "API_TOKEN"
    assert declared.name_in_key("clock") is None
    # what drift declares already is filed and judged as before
    for kind in SUBJECT_KINDS:
        for key in kind.keys:
            subject = f"{kind.kind}:x"
            assert declared.category(subject, key.shown) == DECLARED.category(subject, key.shown)
            assert declared.secrecy(key.shown) == DECLARED.secrecy(key.shown) == key.secret


def test_an_undeclared_key_gets_its_kinds_default() -> None:
    category = DECLARED.category
    # a declared kind: its `undeclared` fallback, else its own name
    assert category("service:decode", "colour") == "process id"
    assert category("service:decode", "unit:colour") == "unit"
    assert category("script:/opt/serve.sh", "colour") == "script exec"
    assert category("systemd:manager", "colour") == "unit"
    assert category("file:/etc/app.conf", "colour") == "file"
    assert category("repo:/opt/sglang", "colour") == "repo"
    # a kind nothing declares, and a subject without a kind
    assert category("accel:0", "clock") == "accel"
    assert category("accel", "clock") == "accel"
    # redaction judges an undeclared key by its value alone, whatever its name says
    assert DECLARED.secrecy("colour:API_TOKEN") == "value"
    assert secret("colour", TOKEN) and not secret("colour:API_TOKEN", "plain words")
    assert secret("env:API_TOKEN", "plain words")  # a declared name prefix, on any subject


def test_the_keys_drift_declares_never_are_the_ones_redaction_leaves_unread() -> None:
    never = {k.key for kind in SUBJECT_KINDS for k in kind.keys if k.secret == "never"}
    assert never == {
        *("pid", "started_at", "sha256", "size", "mode", "head", "dirty", "exit", "ok"),
        # a distribution's version and checkout commit, a mapped file's SHA-256
        *("package:", "package_head:", "lib:", "lib_disk:"),
        # a cache's summary: counts, a digest, times
        *("files", "bytes", "digest", "newest", "oldest"),
    }
    for key in never:
        assert DECLARED.skips(key) and not secret(key, TOKEN)
    assert not DECLARED.skips("content") and secret("content", TOKEN)


@pytest.mark.parametrize(
    ("kinds", "refusal"),
    [
        (
            (SubjectKind("accel", "INDEX", "", (FactKey("env:", "", "accel", "value", "NAME"),)),),
            "accel:INDEX env:NAME is declared 'value', but redaction reads keys alone and treats "
            "it as 'name', as declared by service:NAME env:NAME (name)",
        ),
        (
            (SubjectKind("accel", "INDEX", "", (FactKey("size", "", "accel", "value"),)),),
            "accel:INDEX size is declared 'value', but redaction reads keys alone and treats "
            "it as 'never', as declared by file:PATH size (never)",
        ),
        (
            (SubjectKind("file", "PATH", "", ()),),
            "subject kind 'file' is declared twice",
        ),
    ],
)
def test_declarations_redaction_could_not_honour_are_refused(
    kinds: tuple[SubjectKind, ...], refusal: str
) -> None:
    with pytest.raises(ValueError) as refused:
        Declarations((*SUBJECT_KINDS, *kinds))
    assert str(refused.value) == refusal


@pytest.mark.parametrize(
    ("key", "refusal"),
    [
        (
            FactKey("token", "", "accel", "name"),
            "accel:INDEX token: a key judged by name needs a placeholder, "
            "the name being what follows its prefix",
        ),
        (
            FactKey("limit_", "", "accel", "value", "NAME"),
            "accel:INDEX limit_NAME: a prefix ends with a colon",
        ),
        (FactKey("clock", "again", "accel", "value"), "accel:INDEX: clock is declared twice"),
    ],
)
def test_a_kind_refuses_a_key_it_could_not_look_up(key: FactKey, refusal: str) -> None:
    with pytest.raises(ValueError) as refused:
        SubjectKind("accel", "INDEX", "", (FactKey("clock", "", "accel", "value"), key))
    assert str(refused.value) == refusal


def test_which_keys_move_with_their_line_is_read_from_the_declaration() -> None:
    moving = SubjectKind(
        "accel",
        "INDEX",
        "",
        (
            FactKey("setting:", "", "accel setting", "name", "NAME", moves="line"),
            FactKey("clock", "", "accel clock", "value"),
        ),
    )
    declared = Declarations((*SUBJECT_KINDS, moving))
    assert declared.moves("accel:0", "setting:FAN") == "line"
    assert declared.moves("accel:0", "clock") == ""
    assert declared.moves("file:/etc/x", "setting:FAN") == ""  # the kind decides, not the key
    assert DECLARED.moves("script:/s.sh", "export:A") == "provenance"
    assert DECLARED.moves("script:/s.sh", "content") == ""
    assert DECLARED.moves("service:s", "unit:environment:A") == "line"
    assert DECLARED.moves("service:s", "env:A") == ""
    hidden = SubjectKind(
        "accel",
        "INDEX",
        "",
        (
            FactKey("setting:", "", "accel setting", "name", "NAME", moves="line"),
            FactKey("setting:fan:", "", "accel fan", "name", "NAME"),
        ),
    )
    with pytest.raises(ValueError, match="setting:fan:NAME under it is declared otherwise"):
        Declarations((*SUBJECT_KINDS, hidden))
