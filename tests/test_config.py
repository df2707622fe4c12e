"""drift.toml: a good config loads, a bad one is one line naming file, key and problem, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from drift.cli import cli
from drift.config import load_config
from drift.errors import ConfigError

GOOD = """
host = "gpu-node-7"

[[services]]
name = "decode"
unit = "sglang-decode.service"
script = "serve/decode.sh"

[[services]]
name = "router"
match = "sglang_router.*--pd-disaggregation"

[[files]]
name = "kernels"
paths = ["sglang/**/*.py"]

[[repos]]
path = "/opt/sglang"

[[commands]]
name = "gpu-driver"
run = "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
timeout = 5

[secrets]
allow = ["TOKENIZERS_PARALLELISM"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "drift.toml"
    path.write_text(text)
    return path


def test_good_config_resolves_relative_paths_from_its_folder(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.host == "gpu-node-7"
    decode, router = config.services
    assert decode.unit == "sglang-decode.service"
    assert decode.script == str(tmp_path / "serve/decode.sh")
    assert router.match and router.unit is None
    assert config.files[0].paths == (str(tmp_path / "sglang/**/*.py"),)
    assert config.repos[0].path == "/opt/sglang"
    assert config.commands[0].timeout == 5.0
    assert config.commands[0].cwd == str(tmp_path)  # run beside the config, like its paths
    assert config.secrets.allow == ("TOKENIZERS_PARALLELISM",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('hots = "x"', "hots: unknown key"),
        ("host = 7", "host: expected a string, got an integer"),
        (
            '[[services]]\nname = "a"',
            "services[0]: give exactly one of unit, pidfile, match (found: none)",
        ),
        (
            '[[services]]\nname = "a"\nunit = "a"\npidfile = "/p"',
            "services[0]: give exactly one of unit, pidfile, match (found: unit, pidfile)",
        ),
        ('[[services]]\nunit = "a"', "services[0].name: missing (required)"),
        ('[[services]]\nname = "a"\nmatch = "("', "services[0].match: invalid regular expression"),
        ('[[files]]\nname = "k"\npaths = [1]', "files[0].paths: expected a list of strings"),
        ('[[files]]\nname = "k"', "files[0].paths: missing (required)"),
        (
            '[[commands]]\nname = "c"\nrun = "true"\ntimeout = "soon"',
            "commands[0].timeout: expected a number of seconds, got a string",
        ),
        (
            '[[commands]]\nname = "c"\nrun = "true"\ntimeout = 0',
            "commands[0].timeout: must be greater than 0",
        ),
        (
            '[[commands]]\nname = "c"\nrun = "true"\ntimeout = inf',
            "commands[0].timeout: must be a finite number of seconds",
        ),
        (
            '[[health]]\nname = "h"\nrun = "true"\ntimeout = nan',
            "health[0].timeout: must be a finite number of seconds",
        ),
        (
            '[[health]]\nname = "h"\nrun = "true"\ncwd = 1',
            "health[0].cwd: expected a string, got an integer",
        ),
        (
            '[[commands]]\nname = "c"\nrun = "a"\n[[commands]]\nname = "c"\nrun = "b"',
            "commands[1].name: duplicate name 'c'",
        ),
        ('services = "decode"', "services: expected an array of tables"),
        ('[[health]]\nname = "decode-answers"', "health[0].run: missing (required)"),
        (
            '[[health]]\nname = "h"\nrun = "true"\n[[health]]\nname = "h"\nrun = "false"',
            "health[1].name: duplicate name 'h'",
        ),
        ('[secrets]\nredact = "X"\nshow = ["Y"]', "secrets.show: unknown key"),
        ('host = "a', "TOML syntax error"),
        ('db = "mysql://drift@db/drift"', "db: unsupported scheme 'mysql'"),
        ('db = ""', "db: must not be empty"),
        ('db = "sqlite:///:memory:"', "db: an in-memory database keeps no history"),
        ("db = 5", "db: expected a string, got an integer"),
        # Found by tests/test_fuzz.py: each raised a Python error, not ConfigError.
        ("systemctl = 'sudo \"systemctl'", "systemctl: not a command line: No closing quotation"),
        (
            '[[services]]\nname = "a"\nmatch = "a{99999999999}"',
            "services[0].match: invalid regular expression",
        ),
        (
            '[[services]]\nname = "a"\nmatch = "' + "(" * 2000 + ")" * 2000 + '"',
            "services[0].match: invalid regular expression",
        ),
        ('[[files]]\nname = "k"\npaths = ["~\\u0000"]', "files[0].paths: a path cannot hold a NUL"),
        ('[[services]]\nname = "a"\npidfile = "a\\u0000"', "services[0].pidfile: a path cannot"),
        ('db = "sqlite:///x\\u0000"', "db: a path cannot hold a NUL character"),
        (
            '[[files]]\nname = "k"\npaths = ["x"]\nmax_size = "' + "9" * 5000 + 'MiB"',
            "files[0].max_size: expected a number of bytes or a size like",
        ),
        # A key that is not bare is named as TOML writes it, on the message's one line.
        ('"\\n" = 1', '"\\n": unknown key'),
        ('[[services]]\nname = "a"\n"a b" = 1', 'services[0]."a b": unknown key'),
        ('[[caches]]\nname = "t"', "caches[0].paths: missing (required)"),
        ('[[caches]]\npaths = ["x"]', "caches[0].name: missing (required)"),
        ('[[caches]]\nname = "t"\npaths = ["x"]\nhash = "md5"', "caches[0].hash: unknown hash"),
        ('[[caches]]\nname = "t"\npaths = ["x"]\nhash = 1', "caches[0].hash: expected a string"),
        ('[[caches]]\nname = "t"\npaths = ["x"]\nmax = 1', "caches[0].max: unknown key"),
        (
            '[[caches]]\nname = "t"\npaths = ["x"]\n[[caches]]\nname = "t"\npaths = ["y"]',
            "caches[1].name: duplicate name 't'",
        ),
    ],
)
def test_bad_config_names_file_key_and_problem(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 500


def test_bad_config_on_the_command_line_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[[services]]\nname = "decode"\nunti = "x.service"\n')
    db = tmp_path / "drift.db"
    result = CliRunner().invoke(cli, ["record", "--config", str(path), "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "services[0].unti: unknown key" in result.output
    assert "Traceback" not in result.output
    assert not db.exists()


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["record", "--config", str(tmp_path / "nope.toml"), "--db", str(tmp_path / "d.db")]
    )
    assert result.exit_code == 2
    assert "nope.toml: config file not found" in result.output


def test_config_found_through_env_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "drift.toml").write_text('host = "from-env"\n')
    write(tmp_path, 'host = "from-cwd"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DRIFT_CONFIG", raising=False)
    assert load_config().host == "from-cwd"
    monkeypatch.setenv("DRIFT_CONFIG", str(other / "drift.toml"))
    assert load_config().host == "from-env"


def test_files_with_content_and_format(tmp_path: Path) -> None:
    text = (
        '[[files]]\nname = "serve"\npaths = ["serve.yaml"]\ncontent = true\nformat = "yaml"\n'
        '[[files]]\nname = "hosts"\npaths = ["/etc/hosts"]\ncontent = true\n'
        '[[files]]\nname = "kernels"\npaths = ["k/**"]\n'
    )
    serve, hosts, kernels = load_config(write(tmp_path, text)).files
    assert (serve.content, serve.format) == (True, "yaml")
    assert (hosts.content, hosts.format) == (True, "text")
    assert (kernels.content, kernels.format) == (False, "text")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[files]]\nname = "k"\npaths = ["a"]\ncontent = true\nformat = "ini"',
            "files[0].format: unknown format 'ini' (known: json, yaml, toml, text)",
        ),
        (
            '[[files]]\nname = "k"\npaths = ["a"]\nformat = "json"',
            "files[0].format: format needs content = true",
        ),
        (
            '[[files]]\nname = "k"\npaths = ["a"]\ncontent = false\nformat = "json"',
            "files[0].format: format needs content = true",
        ),
        (
            '[[files]]\nname = "k"\npaths = ["a"]\ncontent = "yes"',
            "files[0].content: expected true or false, got a string",
        ),
        (
            '[[files]]\nname = "k"\npaths = ["a"]\ncontent = true\nformat = 1',
            "files[0].format: expected a string, got an integer",
        ),
    ],
)
def test_bad_content_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {message}"


def test_file_limits_default_and_take_bytes_or_a_size_with_a_binary_unit(tmp_path: Path) -> None:
    entries = [
        "",
        "max_size = 4096\nmax_files = 10\none_file_system = false",
        'max_size = "4GiB"',
        'max_size = " 512 MiB "',
        'max_size = "2TiB"',
        'max_size = "100B"',
    ]
    text = "".join(
        f'[[files]]\nname = "s{i}"\npaths = ["a"]\n{entry}\n' for i, entry in enumerate(entries)
    )
    default, small, gib, mib, tib, plain = load_config(write(tmp_path, text)).files
    limits = [(f.max_size, f.max_files, f.one_file_system) for f in (default, small)]
    assert limits == [(1 << 30, 200_000, True), (4096, 10, False)]
    assert [f.max_size for f in (gib, mib, tib, plain)] == [4 << 30, 512 << 20, 2 << 40, 100]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            'max_size = "4GB"',
            'files[0].max_size: expected a number of bytes or a size like "4GiB" '
            "(B, KiB, MiB, GiB, TiB), got '4GB'",
        ),
        (
            "max_size = 1.5",
            'files[0].max_size: expected a number of bytes or a size like "4GiB" '
            "(B, KiB, MiB, GiB, TiB), got a number",
        ),
        ("max_size = 0", "files[0].max_size: must be greater than 0"),
        ('max_size = "0GiB"', "files[0].max_size: must be greater than 0"),
        ("max_files = true", "files[0].max_files: expected a whole number, got a boolean"),
        ("max_files = -1", "files[0].max_files: must be greater than 0"),
        (
            'one_file_system = "no"',
            "files[0].one_file_system: expected true or false, got a string",
        ),
    ],
)
def test_bad_file_limits_name_the_key(tmp_path: Path, entry: str, message: str) -> None:
    path = write(tmp_path, f'[[files]]\nname = "k"\npaths = ["a"]\n{entry}\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {message}"


def test_starter_config_is_valid_as_written_and_with_every_example_uncommented(
    tmp_path: Path,
) -> None:
    from drift.sample_config import STARTER_CONFIG

    assert load_config(write(tmp_path, STARTER_CONFIG)).services == ()
    # "# key = value" and "# [[table]]" lines are examples; "# # ..." are alternatives.
    examples = "\n".join(
        line[2:]
        if line.startswith("# ")
        and not line.startswith("# #")
        and ("=" in line or line.startswith("# ["))
        else line
        for line in STARTER_CONFIG.splitlines()
    )
    config = load_config(write(tmp_path, examples))
    assert [s.name for s in config.services] == ["decode"]
    assert [h.name for h in config.health] == ["decode-answers"]
    assert config.files[1].format == "json"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("drift.db", "{base}/drift.db"),
        ("state/drift.db", "{base}/state/drift.db"),
        ("/var/lib/drift/drift.db", "/var/lib/drift/drift.db"),
        ("sqlite:///rel.db", "sqlite:///{base}/rel.db"),
        ("sqlite:////abs/drift.db", "sqlite:////abs/drift.db"),
        ("postgresql://drift@db-host/drift", "postgresql://drift@db-host/drift"),
    ],
)
def test_db_is_a_path_from_the_config_folder_or_a_url(
    tmp_path: Path, value: str, expected: str
) -> None:
    config = load_config(write(tmp_path, f'db = "{value}"\n'))
    assert config.db == expected.format(base=tmp_path)


def test_an_endpoint_takes_a_url_a_timeout_pointers_and_its_service(tmp_path: Path) -> None:
    text = (
        '[[services]]\nname = "decode"\nmatch = "x"\n'
        '[[endpoints]]\nname = "info"\nurl = "http://127.0.0.1:30000/get_server_info"\n'
        'timeout = 2.5\npointer = "/server_args"\nignore = ["/a~1b", "/stats"]\n'
        'service = "decode"\n'
        '[[endpoints]]\nname = "version"\nurl = "https://engine.internal:8000/version"\n'
    )
    info, version = load_config(write(tmp_path, text)).endpoints
    assert (info.url, info.timeout, info.pointer, info.ignore, info.service) == (
        "http://127.0.0.1:30000/get_server_info",
        2.5,
        "/server_args",
        ("/a~1b", "/stats"),
        "decode",
    )
    assert (version.timeout, version.pointer, version.ignore, version.service) == (
        5.0,
        "",
        (),
        None,
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("", "endpoints[0].url: missing (required)"),
        (
            'url = "ftp://h/x"',
            "endpoints[0].url: 'ftp://h/x': expected http://HOST... or https://HOST...",
        ),
        (
            'url = "http:///x"',
            "endpoints[0].url: 'http:///x': expected http://HOST... or https://HOST...",
        ),
        (
            'url = "http://h:port/"',
            "endpoints[0].url: 'http://h:port/' is not a URL: "
            "Port could not be cast to integer value as 'port'",
        ),
        (
            'url = "http://h/a b"',
            "endpoints[0].url: 'http://h/a b': a URL holds no space or control character",
        ),
        ('url = "http://h"\ntimeout = 0', "endpoints[0].timeout: must be greater than 0"),
        (
            'url = "http://h"\npointer = "server_args"',
            "endpoints[0].pointer: not a JSON pointer (RFC 6901): "
            "'server_args' does not start with '/'",
        ),
        (
            'url = "http://h"\nignore = ["/a~2"]',
            "endpoints[0].ignore: not a JSON pointer (RFC 6901): "
            "'/a~2': '~' must be followed by 0 or 1",
        ),
        (
            'url = "http://h"\nignore = [""]',
            'endpoints[0].ignore: "" is the whole document: name the parts to leave out',
        ),
        (
            'url = "http://h"\nservice = "decod"',
            "endpoints[0].service: no [[services]] entry named 'decod' (known: none)",
        ),
        (
            'url = "http://h"\nheaders = {}',
            "endpoints[0].headers: unknown key "
            "(known keys: ignore, name, pointer, service, timeout, url)",
        ),
    ],
)
def test_a_bad_endpoint_is_one_line_naming_its_key(
    tmp_path: Path, entry: str, message: str
) -> None:
    path = write(tmp_path, f'[[endpoints]]\nname = "e"\n{entry}\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {message}"


def test_two_endpoints_of_one_name_are_refused(tmp_path: Path) -> None:
    entry = '[[endpoints]]\nname = "e"\nurl = "http://h"\n'
    path = write(tmp_path, entry + entry)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: endpoints[1].name: duplicate name 'e'"


def test_a_cache_path_is_expanded_for_drifts_own_user_and_taken_from_the_config_folder(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[[caches]]\nname = "t"\npaths = ["~/.triton/cache", "rel/*/ops"]')
    [cache] = load_config(path).caches
    assert cache.paths == (
        os.path.expanduser("~/.triton/cache"),
        f"{tmp_path.resolve()}/rel/*/ops",
    )
    assert cache.hash == "stat"
