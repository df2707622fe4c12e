"""Reading `Environment=` lines the way systemd merges them: order, resets, continuations.

The end-to-end check, with systemd itself deciding the values, is in
tests/test_record_systemd.py; these pin the reading rules on real files.
"""

from __future__ import annotations

from pathlib import Path

from drift.collectors.unit_files import (
    disk_environment,
    drop_ins_on_disk,
    environment_origins,
    files_root,
    read_unit_files,
)
from drift.rooted import RootedFiles


def box(path: Path) -> RootedFiles:
    """A folder read as a container's root."""
    return RootedFiles(str(path), "test")


def test_the_last_line_wins_a_reset_forgets_and_only_systemd_s_value_is_claimed(
    tmp_path: Path,
) -> None:
    unit = tmp_path / "etc/systemd/system/decode.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(
        "[Unit]\nEnvironment=NOT_SERVICE=1\n"
        "[Service]\n"
        "# Environment=COMMENTED=1\n"
        'Environment="A=1 2" B=old \\\n'
        "  C=3\n"
        "Environment=B=new\n"
        "Environment=GONE=1\n"
    )
    dropin = tmp_path / "etc/systemd/system/decode.service.d/10-reset.conf"
    dropin.parent.mkdir()
    dropin.write_text("[Service]\nEnvironment=\nEnvironment=A=kept B=new C=3\n")
    paths = [
        "/etc/systemd/system/decode.service",
        "/etc/systemd/system/decode.service.d/10-reset.conf",
    ]
    # What systemd reports after the reset: A, B and C from the drop-in.
    systemd = {"A": "kept", "B": "new", "C": "3"}
    found = environment_origins(paths, systemd, box(tmp_path))
    assert {name: (o.file.rsplit("/", 1)[1], o.line) for name, o in found.items()} == {
        "A": ("10-reset.conf", 3),
        "B": ("10-reset.conf", 3),
        "C": ("10-reset.conf", 3),
    }
    # Without the drop-in: the continued line gives A and C, the later line B.
    alone = environment_origins(
        paths[:1], {"A": "1 2", "B": "new", "C": "3", "GONE": "1"}, box(tmp_path)
    )
    assert {name: o.line for name, o in alone.items()} == {"A": 5, "B": 7, "C": 5, "GONE": 8}
    assert alone["A"].text == 'Environment="A=1 2" B=old \\'
    # A value systemd does not hold as read (a specifier it expanded): no line is claimed.
    assert environment_origins(paths[:1], {"B": "other"}, box(tmp_path)) == {}


def test_an_unreadable_file_claims_nothing_and_proc_root_names_the_files_root(
    tmp_path: Path,
) -> None:
    assert environment_origins(["/missing.service"], {"A": "1"}, box(tmp_path)) == {}
    assert files_root("/proc") == "/"
    assert files_root("/proc/4242/root/proc") == "/proc/4242/root/"
    assert files_root("/srv/elsewhere") is None
    assert environment_origins(["/x.service"], {"A": "1"}, None) == {}


def test_a_line_drift_cannot_split_is_skipped_not_a_crash(tmp_path: Path) -> None:
    unit = tmp_path / "etc/systemd/system/x.service"
    unit.parent.mkdir(parents=True)
    unit.write_text('[Service]\nEnvironment="A=unterminated\nEnvironment=B=2\n')
    found = disk_environment(read_unit_files(["/etc/systemd/system/x.service"], box(tmp_path)))
    assert found is not None
    assert {name: (value, o.line) for name, (value, o) in found.items()} == {"B": ("2", 3)}


def test_drop_ins_not_loaded_yet_are_found_by_name_across_folders(tmp_path: Path) -> None:
    def conf(path: str) -> None:
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("[Service]\n")

    loaded = ("/usr/lib/systemd/system/web@.service.d/10-vendor.conf",)
    conf(loaded[0])
    conf("/etc/systemd/system/web@1.service.d/20-new.conf")  # since the last daemon-reload
    conf("/run/systemd/system/web@1.service.d/05-runtime.conf")
    conf("/etc/systemd/system/web@.service.d/10-vendor.conf")  # hides the vendor's, by name
    conf("/etc/systemd/system/web@1.service.d/notes.txt")  # not a drop-in
    assert drop_ins_on_disk("web@1.service", loaded, box(tmp_path)) == [
        "/run/systemd/system/web@1.service.d/05-runtime.conf",
        "/etc/systemd/system/web@.service.d/10-vendor.conf",
        "/etc/systemd/system/web@1.service.d/20-new.conf",
    ]
