"""`[container]`: a box watched from the host by its own paths, its leader found afresh each record.

Two kinds of container: a process chrooted into a folder (a container with files
and nothing else, fast, for how paths are read and how a lost container reads), and
the real systemd booted with systemd-nspawn (for the services and a container
restarted between two records).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from systemd_container import SCRIPT as CONTAINER_SCRIPT
from systemd_container import SystemdContainer, require_systemd

from drift.config import load_config
from drift.errors import ConfigError
from drift.subjects import SERVICE

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot and nsenter need root")

SERVE = """#!/bin/bash
source "$(dirname "$0")/common.sh"
if [ -f /etc/serve/extra.env ]; then
    export EXTRA=1
fi
export SGLANG_OPT=0
exec /usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null
"""

DECOY = "#!/bin/bash\nexport DECOY=1\nexec /bin/false\n"


def record(tmp_path: Path, config: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_drift(
        ["record", "--config", str(config), "--db", str(tmp_path / "drift.db")],
        tmp_path,
        check=check,
    )


def drift_json(tmp_path: Path, config: Path, *args: str) -> dict:
    out = run_drift(
        [*args, "--format", "json", "--config", str(config), "--db", str(tmp_path / "drift.db")],
        tmp_path,
    ).stdout
    data: dict = json.loads(out)["data"]
    return data


def state(tmp_path: Path, config: Path, *at: str) -> dict[str, dict[str, dict]]:
    """subject -> key -> fact, as `drift show` gives them."""
    data = drift_json(tmp_path, config, "show", *at)
    return {s["subject"]: {f["key"]: f for f in s["facts"]} for s in data["subjects"]}


# ---------------------------------------------------------------- a chrooted process


@pytest.fixture
def chrooted(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A process whose / is a folder: a container's leader, with the container's files."""
    root = tmp_path / "box"
    root.mkdir()
    leader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time; os.chroot(sys.argv[1]); os.chdir('/'); "
            "print('ready', flush=True); time.sleep(600)",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert leader.stdout is not None and leader.stdout.readline() == "ready\n"
    try:
        yield root, leader
    finally:
        leader.kill()
        leader.wait()
        leader.stdout.close()


def lay_out(root: Path, host_twin: Path) -> None:
    """A serve tree whose `current` is an absolute link, and a twin on the host where a
    link followed by the host's kernel would lead.
    """
    inside = root / str(host_twin).lstrip("/")
    for where, text in ((inside, SERVE), (host_twin, DECOY)):
        where.mkdir(parents=True, exist_ok=True)
        (where / "decode.sh").write_text(text)
        (where / "common.sh").write_text(f"export COMMON={'inside' if where is inside else 1}\n")
    (root / "opt/serve").mkdir(parents=True)
    (root / "opt/serve/current").symlink_to(host_twin)  # absolute: /tmp/.../v2 in the box
    (root / "etc/serve").mkdir(parents=True)
    (root / "etc/serve/extra.env").write_text("A=1\n")
    (root / "etc/serve/app.json").write_text('{"workers": 4}\n')


def write_config(tmp_path: Path, container: str, files: bool = True) -> Path:
    config = tmp_path / "drift.toml"
    text = f'host = "box"\n[container]\n{container}\n'
    text += '[[services]]\nname = "decode"\nmatch = "tail -f"\n'
    text += 'script = "/opt/serve/current/decode.sh"\n'
    if files:
        text += '[[files]]\nname = "serve"\npaths = ["/opt/serve/current/*.sh", "/etc/serve/*"]\n'
    config.write_text(text)
    return config


def laid_out_box(tmp_path: Path, root: Path, leader: int) -> Path:
    """The serve tree in the chroot, its leader in a pidfile, a config naming both."""
    lay_out(root, tmp_path / "v2")
    (tmp_path / "leader.pid").write_text(f"{leader}\n")
    return write_config(tmp_path, 'name = "sglang"\npidfile = "leader.pid"')


@needs_root
def test_paths_are_read_inside_the_container_by_its_own_names(
    tmp_path: Path, chrooted: tuple[Path, subprocess.Popen[str]]
) -> None:
    root, leader = chrooted
    config = laid_out_box(tmp_path, root, leader.pid)

    out = record(tmp_path, config, check=False)
    # A chroot has no /proc: its service alone cannot be read.
    errors = [line for line in out.stderr.splitlines() if line.strip().startswith("!")]
    assert errors and all("service:decode" in line for line in errors), out.stderr
    facts = state(tmp_path, config)
    # Subjects are the container's paths: no host PID, no /proc road in any of them.
    assert not [s for s in facts if "/proc/" in s or str(root) in s]
    script = facts["script:/opt/serve/current/decode.sh"]
    # The absolute link resolved inside the container: its script, not the host's twin.
    assert script["export:SGLANG_OPT"]["value"] == "0"
    assert "export:DECOY" not in script
    assert script["export:SGLANG_OPT"]["where"] == (
        "/opt/serve/current/decode.sh:6 in container sglang"
    )
    # What the script sources and the files it tests for are the container's too.
    assert script["export:COMMON"]["value"] == "inside"
    assert script["export:EXTRA"]["value"] == "1"
    assert facts["script:/opt/serve/current/common.sh"]["content"]["value"] == (
        "export COMMON=inside"
    )
    decode = facts["file:/opt/serve/current/decode.sh"]
    assert decode["sha256"]["value"] == hashlib.sha256(SERVE.encode()).hexdigest()
    assert decode["sha256"]["where"] == "matched /opt/serve/current/*.sh in container sglang"
    assert facts["file:/etc/serve/app.json"]["size"]["value"] == str(len('{"workers": 4}\n'))
    assert "file:/etc/serve/extra.env" in facts


@needs_root
def test_a_container_that_cannot_be_found_is_a_blind_spot_not_a_removal(
    tmp_path: Path, chrooted: tuple[Path, subprocess.Popen[str]]
) -> None:
    root, leader = chrooted
    config = laid_out_box(tmp_path, root, leader.pid)
    pidfile = tmp_path / "leader.pid"
    record(tmp_path, config, check=False)
    before = state(tmp_path, config)

    leader.kill()
    leader.wait()
    out = record(tmp_path, config, check=False)
    assert out.returncode == 4
    message = (
        f"container sglang not found: its leader PID {leader.pid} (pidfile {pidfile}) is not "
        "running: nothing in it was read"
    )
    assert message in out.stderr
    # Every fact keeps its last value: nothing reads as removed.
    assert state(tmp_path, config) == before
    data = drift_json(tmp_path, config, "since", "--stable", "#1", "--all")
    assert data["suspects"] == []
    assert {(b["subject"], b["message"]) for b in data["blind_spots"]} >= {
        ("script:/", message),
        ("file:/", message),
        ("service:decode", message),
    }


@needs_root
@pytest.mark.parametrize(
    ("container", "why"),
    [
        ('pidfile = "missing.pid"', "pidfile {tmp}/missing.pid does not exist"),
        ('pidfile = "self.pid"', "PID {self} (pidfile {tmp}/self.pid) is not in a container"),
        ('leader_command = "echo 0"', "`echo 0` gave PID 0: the container is not running"),
        ('leader_command = "echo 12 34"', "`echo 12 34` gave '12 34', not one PID"),
        (
            'leader_command = ["sh", "-c", "echo no such container >&2; exit 1"]',
            "`sh -c 'echo no such container >&2; exit 1'` failed (exit 1): no such container",
        ),
        ('leader_command = "sleep 5"\ntimeout = 0.3', "`sleep 5` timed out after 0.3s"),
        (
            'leader_command = "/nonexistent/docker inspect"',
            "`/nonexistent/docker inspect` could not run",
        ),
    ],
)
def test_a_leader_that_is_not_the_container_is_said_so(
    tmp_path: Path, container: str, why: str
) -> None:
    # drift's own PID: alive, but its root is the host's /.
    me = os.getpid()
    (tmp_path / "self.pid").write_text(f"{me}\n")
    config = write_config(tmp_path, f'name = "sglang"\n{container}', files=False)
    out = record(tmp_path, config, check=False)
    assert out.returncode == 4
    expected = "container sglang not found: " + why.format(tmp=tmp_path, self=me)
    assert expected in out.stderr, out.stderr


@needs_root
def test_a_pidfile_older_than_its_process_is_stale(
    tmp_path: Path, chrooted: tuple[Path, subprocess.Popen[str]]
) -> None:
    """A pidfile written before its PID's process started was written for another one."""
    _root, leader = chrooted
    pidfile = tmp_path / "leader.pid"
    pidfile.write_text(f"{leader.pid}\n")
    config = write_config(tmp_path, 'name = "sglang"\npidfile = "leader.pid"', files=False)
    assert "container sglang not found" not in record(tmp_path, config, check=False).stderr
    long_ago = time.time() - 3600
    os.utime(pidfile, (long_ago, long_ago))
    out = record(tmp_path, config, check=False)
    assert (
        f"container sglang not found: pidfile {pidfile} is stale: PID {leader.pid} started "
        "after the pidfile was written"
    ) in out.stderr


@needs_root
def test_a_checkout_in_a_container_without_git_is_a_blind_spot(
    tmp_path: Path, chrooted: tuple[Path, subprocess.Popen[str]]
) -> None:
    root, leader = chrooted
    (root / "opt/sglang/.git").mkdir(parents=True)
    (tmp_path / "leader.pid").write_text(f"{leader.pid}\n")
    config = tmp_path / "drift.toml"
    config.write_text(
        '[container]\nname = "sglang"\npidfile = "leader.pid"\n[[repos]]\npath = "/opt/sglang"\n'
        '[[repos]]\npath = "/opt/nothing"\n'
    )
    out = record(tmp_path, config, check=False)
    assert out.returncode == 4
    assert "repo:/opt/sglang: cannot run git in the container: nsenter: failed to execute git" in (
        out.stderr
    )
    assert "repo:/opt/nothing: /opt/nothing: no such file or directory in container sglang" in (
        out.stderr
    )


def test_a_machine_needs_machined(tmp_path: Path) -> None:
    """`machine` asks machinectl; where machined does not run, machinectl says why."""
    if subprocess.run(["which", "machinectl"], capture_output=True).returncode != 0:
        pytest.skip("machinectl is not installed")
    config = write_config(tmp_path, 'machine = "sglang"', files=False)
    out = record(tmp_path, config, check=False)
    assert out.returncode == 4
    assert "container sglang not found: `machinectl show --property=Leader --value -- sglang`" in (
        out.stderr
    )


# ---------------------------------------------------------------- the config


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[container]\nname = "x"',
            "container: give exactly one of machine, pidfile, leader_command",
        ),
        (
            '[container]\nname = "x"\npidfile = "/p"\nmachine = "x"',
            "(found: machine, pidfile)",
        ),
        ('[container]\npidfile = "/p"', "container.name: missing (required)"),
        ('[container]\nmachine = "-x"', "container.machine: '-x' is not a machine name"),
        ('[container]\nname = "x"\nleader_command = []', "container.leader_command: must not be"),
        ('[container]\nname = "x"\nleader_command = "a \'b"', "not a command line"),
        ('[container]\nname = "x"\nmachine = "x"\nport = 1', "container.port: unknown key"),
        ('[container]\nmachine = "x"\ntimeout = 0', "container.timeout: must be greater than 0"),
        (
            '[container]\nmachine = "x"\n[[services]]\nname = "d"\nunit = "d"\nscript = "d.sh"',
            "services[0].script: 'd.sh': a path in container x must be absolute",
        ),
        (
            '[container]\nmachine = "x"\n[[files]]\nname = "f"\npaths = ["~/x"]',
            "files[0].paths: '~/x': a path in container x must be absolute",
        ),
        (
            'systemctl = "systemctl"\n[container]\nmachine = "x"',
            "systemctl: not with [container]: drift derives it from the container's leader PID",
        ),
        ('proc_root = "/proc"\n[container]\nmachine = "x"', "proc_root: not with [container]"),
    ],
)
def test_bad_container_config_is_one_line_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "drift.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    out = run_drift(
        ["record", "--config", str(path), "--db", str(tmp_path / "d.db")], tmp_path, check=False
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and message in out.stderr


def test_container_paths_are_kept_as_the_container_names_them(tmp_path: Path) -> None:
    path = tmp_path / "drift.toml"
    path.write_text(
        '[container]\nmachine = "sglang"\n'
        '[[services]]\nname = "d"\npidfile = "/run/d.pid"\nscript = "/opt//serve/decode.sh"\n'
        '[[files]]\nname = "f"\npaths = ["/etc/serve/*.json"]\n[[repos]]\npath = "/opt/sglang/"\n'
        '[[commands]]\nname = "c"\nrun = "true"\ncwd = "checks"\n'
    )
    config = load_config(path)
    assert config.container is not None and config.container.name == "sglang"
    (service,) = config.services
    assert (service.pidfile, service.script) == ("/run/d.pid", "/opt/serve/decode.sh")
    assert config.files[0].paths == ("/etc/serve/*.json",)
    assert config.repos[0].path == "/opt/sglang"
    assert config.commands[0].cwd == str(tmp_path / "checks")  # a command runs on the host


# ---------------------------------------------------------------- the real systemd

UNIT = """[Unit]
Description=decode server (test)

[Service]
ExecStart=/bin/bash /opt/serve/current/decode.sh
ExecStartPost=/bin/sh -c 'echo $MAINPID > /run/decode.pid'
Environment=CUDA_VISIBLE_DEVICES=4,5
"""

# What a restart changes: the process, the variables systemd sets per start, and
# systemd's own account of the unit's runs (declared as such in the registry).
VOLATILE = {
    "pid",
    "started_at",
    "env:INVOCATION_ID",
    "env:JOURNAL_STREAM",
    "env:SYSTEMD_EXEC_PID",
    *(k.key for k in SERVICE.keys if k.category == "unit runtime"),
}


def provision(box: SystemdContainer, host_twin: Path, checkout: Path) -> None:
    """The box's state: what `--volatile=overlay` loses at every stop, written again the same.

    The rootfs has no git: the host's is copied in (the same Debian release), to read
    the checkout copied to /opt/sglang.
    """
    lay_out(box.root, host_twin)
    box.write_unit("decode.service", UNIT)
    box.daemon_reload()
    box.start("decode.service")
    shutil.copy2("/usr/bin/git", box.root / "usr/local/bin/git")
    subprocess.run(["cp", "-a", str(checkout), str(box.root / "opt/sglang")], check=True)


def make_checkout(where: Path) -> dict[str, str]:
    """A git checkout with a commit, a modified file and an untracked one; what git says."""
    where.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    (where / "server.py").write_text("print('serve')\n")
    git("add", "server.py")
    git("-c", "user.email=dev@example.com", "-c", "user.name=dev", "commit", "-qm", "first")
    (where / "server.py").write_text("print('serve, patched')\n")
    (where / "notes.txt").write_text("local\n")
    says = {"head": git("rev-parse", "HEAD"), "branch": "main", "dirty": "yes", "untracked": "1"}
    os.chown(where, 1000, 1000)  # owned by someone else, as a developer's checkout is
    return says


@pytest.mark.systemd
@needs_root
def test_a_restarted_container_keeps_its_subjects_and_history(tmp_path: Path) -> None:
    require_systemd()
    box = SystemdContainer()
    twin = tmp_path / "v2"
    checkout = tmp_path / "checkout"
    git_says = make_checkout(checkout)
    try:
        box.boot()
        provision(box, twin, checkout)
        config = tmp_path / "drift.toml"
        leader = [str(CONTAINER_SCRIPT), "leader", str(box.directory), box.name]
        config.write_text(
            f'host = "box"\n[container]\nname = "sglang"\nleader_command = {json.dumps(leader)}\n'
            '[[services]]\nname = "decode"\nunit = "decode.service"\n'
            'script = "/opt/serve/current/decode.sh"\n'
            '[[services]]\nname = "by-pidfile"\npidfile = "/run/decode.pid"\n'
            '[[files]]\nname = "serve"\npaths = ["/opt/serve/current/*.sh", "/etc/serve/*"]\n'
            '[[repos]]\npath = "/opt/sglang"\n'
        )
        first = record(tmp_path, config).stdout
        assert ", 0 errors," in first
        before = state(tmp_path, config)
        decode = before["service:decode"]
        main_pid = box.run_systemctl("show", "-p", "MainPID", "--value", "decode.service")
        assert decode["pid"]["value"] == main_pid.stdout.strip()
        # The pidfile is the container's /run/decode.pid, naming a PID of its own /proc.
        assert before["service:by-pidfile"]["pid"]["value"] == main_pid.stdout.strip()
        assert decode["env:COMMON"]["value"] == "inside"  # what systemd really started
        assert decode["env:SGLANG_OPT"]["where"].endswith(
            "/proc/" + decode["pid"]["value"] + "/environ) in container sglang"
        )
        assert decode["unit:environment:CUDA_VISIBLE_DEVICES"]["where"] == (
            "/etc/systemd/system/decode.service:7 in container sglang"
        )
        assert not [s for s in before if "/proc/" in s]
        # The checkout, read by git inside the container, says what git says of it.
        repo = before["repo:/opt/sglang"]
        assert {key: repo[key]["value"] for key in git_says} == git_says
        assert repo["head"]["where"] == "/opt/sglang in container sglang"
        old_leader = box.leader_pid

        # The container goes away: a blind spot, nothing gone.
        box.stop()
        out = record(tmp_path, config, check=False)
        assert out.returncode == 4 and "container sglang not found" in out.stderr
        assert state(tmp_path, config) == before

        # And comes back, under another leader PID, with the same files.
        box.boot()
        assert box.leader_pid != old_leader
        provision(box, twin, checkout)
        record(tmp_path, config)
        after = state(tmp_path, config)
        assert after.keys() == before.keys()
        changed = {
            (subject, key)
            for subject, facts in after.items()
            for key, fact in facts.items()
            if before[subject].get(key, {}).get("value") != fact["value"]
        }
        # Files rewritten at boot (new inodes, new times) are unchanged facts; the
        # service restarted, and only what a restart moves moved.
        assert {subject for subject, _ in changed} <= {"service:decode", "service:by-pidfile"}
        assert {key for _, key in changed} <= VOLATILE
        assert ("service:decode", "started_at") in changed

        data = drift_json(tmp_path, config, "since", "--stable", "#1", "--all")
        # What `drift since` says: no suspect, the restart on the timeline, and the record
        # taken while the container was away as a blind spot that has passed.
        assert data["suspects"] == []
        restarts = " ".join(e["text"] for e in data["timeline"] if e["kind"] == "restart")
        assert "restart of " in restarts and "decode" in restarts
        assert f"-> {after['service:decode']['pid']['value']}" in restarts
        assert {(b["subject"], b["current"]) for b in data["blind_spots"]} == {
            ("service:decode", False),
            ("service:by-pidfile", False),
            ("script:/", False),
            ("file:/", False),
            ("repo:/", False),
            ("systemd:manager", False),
        }
        assert all("container sglang not found" in b["message"] for b in data["blind_spots"])
    finally:
        box.stop()
