"""Which Python a running process is, and the folders its distributions are found in.

Worked out without running anything of the process, the way CPython 3.11's
own start-up does it (``Modules/getpath.py`` and ``Lib/site.py``): argv[0]
resolved against the process's PATH and working folder, ``pyvenv.cfg``
beside that executable or one folder up (its ``home``, ``version`` and
``include-system-site-packages``), PYTHONHOME, PYTHONPATH, the stdlib
found by its landmark (``lib/pythonX.Y/os.py``), the user site (the
process's HOME; off under ``-s``, ``-I``, PYTHONNOUSERSITE, a set-uid
process, or a venv without system site packages), the site folders (Debian's
``dist-packages`` when the interpreter's own site.py says so) and the
``.pth`` files in them. The interpreter's command-line options (``-E``,
``-I``, ``-s``, ``-S``, ``-P``) are read from argv.

What cannot be known is said, never guessed: argv[0] that does not lead to
the executable the kernel runs (a process that rewrote its title, a binary
replaced under it) is `PythonUnknown`; a ``.pth`` line that runs code is a
note in `PythonEnv.unsure`, since that code may move the path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from drift.small_files import Unread, as_text, read_small

# python, python3, python3.11, python3.11d: the names CPython installs itself under.
PTH_BYTES = 1 << 20  # a .pth file names folders, one a line
SITE_PY = 1 << 20  # the interpreter's site.py is some 25 kB

_INTERPRETER = re.compile(r"python(\d+(\.\d+)?)?[a-z]?")
# Options that take a value (the next word when not glued on), and those that end the options.
_WITH_VALUE = frozenset("WX")
_LAST = frozenset("cm")


class PythonUnknown(Exception):
    """A Python process whose interpreter or path drift cannot tell: a blind spot, not a guess."""


@dataclass(frozen=True)
class PythonEnv:
    """A Python process's interpreter and the folders on its sys.path that exist."""

    executable: str  # as argv[0] leads to it (a venv's bin/python, not its target)
    resolved: str  # how argv[0] was found, in words
    prefix: str  # sys.prefix: a venv's folder, or the base prefix
    base_prefix: str
    version: str  # "3.11"
    paths: tuple[str, ...]
    unsure: tuple[str, ...] = ()

    @property
    def in_venv(self) -> bool:
        return self.prefix != self.base_prefix


@dataclass(frozen=True)
class _Options:
    """The interpreter options that decide its path, and what it runs (script, -m, -c)."""

    flags: frozenset[str]
    mode: str  # "script", "m", "c" or "" (interactive / stdin)
    script: str | None


def is_interpreter(exe: str) -> bool:
    """Whether the executable the kernel runs is a CPython interpreter, by its name."""
    return _INTERPRETER.fullmatch(os.path.basename(exe.removesuffix(" (deleted)"))) is not None


def python_env(
    exe: str,
    argv: Sequence[str],
    environ: Mapping[str, str],
    cwd: str,
    *,
    user_site_allowed: bool = True,
) -> PythonEnv:
    """The interpreter and path of a Python process; raises PythonUnknown when unsure.

    `exe` is /proc/PID/exe, `argv` its command line, `environ` and `cwd` its
    own. `user_site_allowed` is False for a process whose real and effective
    ids differ (site.py turns the user site off then).
    """
    if exe.endswith(" (deleted)"):
        raise PythonUnknown(f"its interpreter {exe.removesuffix(' (deleted)')} was replaced")
    if not argv:
        raise PythonUnknown("its command line is empty")
    options = _options(argv[1:])
    ignore_env = bool(options.flags & {"E", "I"})
    env = {} if ignore_env else environ
    executable, resolved = _executable(argv[0], environ.get("PATH"), cwd)
    if os.path.realpath(executable) != os.path.realpath(exe):
        raise PythonUnknown(
            f"argv[0] {argv[0]!r} leads to {executable}, not to {exe} that it runs "
            "(a rewritten process title?)"
        )
    venv = _pyvenv_cfg(executable)
    unsure: list[str] = []
    version = _version(venv, exe)
    platlibdir = env.get("PYTHONPLATLIBDIR") or "lib"
    if env.get("PYTHONHOME"):
        base = _abspath(env["PYTHONHOME"].split(":", 1)[0], cwd)
    else:
        home = venv.get("home") if venv else None
        start = os.path.realpath(home if home else os.path.dirname(exe))
        base = _landmark(start, platlibdir, version)
    prefix = os.path.dirname(venv["__file__"]) if venv else base
    system_site = not venv or venv.get("include-system-site-packages", "").lower() == "true"

    paths: list[str] = []
    path0 = _path0(options, env, cwd)
    if path0 is not None:
        paths.append(path0)
    for entry in env.get("PYTHONPATH", "").split(":") if env.get("PYTHONPATH") else ():
        paths.append(_abspath(entry, cwd))
    stdlib = f"{base}/{platlibdir}/python{version}"
    paths += [f"{base}/{platlibdir}/python{version.replace('.', '')}.zip", stdlib]
    paths.append(f"{stdlib}/lib-dynload")
    if "S" not in options.flags:
        user = (
            user_site_allowed
            and system_site
            and not (options.flags & {"s", "I"})
            and not env.get("PYTHONNOUSERSITE")
        )
        prefixes = [prefix, base] if system_site else [prefix]
        paths = _site(paths, prefixes, base, version, platlibdir, env, user, unsure)
    return PythonEnv(
        executable=executable,
        resolved=resolved,
        prefix=prefix,
        base_prefix=base,
        version=version,
        paths=tuple(_existing(paths, unsure)),
        unsure=tuple(dict.fromkeys(unsure)),
    )


def mapped_interpreter(exe: str, mapped: Sequence[str]) -> tuple[str, str, str]:
    """(sys.prefix, base prefix, X.Y) of a Python process known by its executable and mapped files.

    For a process that rewrote its title, whose argv[0] and environment are
    gone: /proc/PID/exe is the base interpreter (a venv's python is a link
    to it), and a file it maps from a venv's site folder names that venv.
    No venv among them is not proof of none (a venv of pure-Python packages
    maps nothing of its own): PythonUnknown then, as for two venvs.
    """
    if exe.endswith(" (deleted)"):
        raise PythonUnknown(f"its interpreter {exe.removesuffix(' (deleted)')} was replaced")
    venvs = sorted(
        {
            prefix
            for path in mapped
            if (prefix := _site_prefix(path)) is not None and os.path.isfile(f"{prefix}/pyvenv.cfg")
        }
    )
    if not venvs:
        raise PythonUnknown("no file it maps is in a venv: whether it runs in one is not known")
    if len(venvs) > 1:
        raise PythonUnknown(f"it maps files of {len(venvs)} venvs ({', '.join(venvs)})")
    venv = _pyvenv_cfg(f"{venvs[0]}/bin/python")
    version = _version(venv, exe)
    return venvs[0], _landmark(os.path.realpath(os.path.dirname(exe)), "lib", version), version


def _site_prefix(path: str) -> str | None:
    """PREFIX of a file under PREFIX/lib*/pythonX.Y/site-packages (or dist-packages), else None."""
    parts = path.split("/")
    for i in range(len(parts) - 2, 2, -1):
        if parts[i] in ("site-packages", "dist-packages") and parts[i - 1].startswith("python"):
            return "/".join(parts[: i - 2]) or None
    return None


def _options(args: Sequence[str]) -> _Options:
    """The interpreter's own options before what it runs (`python -sE -m mod ...`)."""
    flags: set[str] = set()
    words = iter(args)
    for word in words:
        if word == "--" or not word.startswith("-") or word == "-":
            script = next(words, None) if word == "--" else word
            return _Options(frozenset(flags), "" if script in (None, "-") else "script", script)
        if word.startswith("--"):
            if word == "--check-hash-based-pycs":
                next(words, None)
            continue
        for at, letter in enumerate(word[1:], start=1):
            if letter in _LAST:
                return _Options(frozenset(flags), letter, None)
            if letter in _WITH_VALUE:
                if at == len(word) - 1:
                    next(words, None)
                break
            flags.add(letter)
    return _Options(frozenset(flags), "", None)


def _executable(argv0: str, path: str | None, cwd: str) -> tuple[str, str]:
    """Where argv[0] leads, as getpath finds `sys.executable`: PATH when it has no slash."""
    if "/" in argv0:
        if argv0.startswith("/"):
            return os.path.normpath(argv0), f"argv[0] {argv0}"
        return _abspath(argv0, cwd), f"argv[0] {argv0} from {cwd}"
    for folder in (path or "").split(":"):
        candidate = _abspath(os.path.join(folder, argv0), cwd)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate, f"argv[0] {argv0} on its PATH"
    raise PythonUnknown(f"argv[0] {argv0!r} is not on its PATH")


def _pyvenv_cfg(executable: str) -> dict[str, str] | None:
    """pyvenv.cfg beside the executable or one folder up, as key -> value (None: no venv)."""
    folder = os.path.dirname(executable)
    for candidate in (f"{folder}/pyvenv.cfg", f"{os.path.dirname(folder)}/pyvenv.cfg"):
        try:
            data = read_small(candidate)
        except Unread as exc:
            raise PythonUnknown(str(exc)) from None
        if data is None:
            continue
        out = {"__file__": candidate}
        for line in as_text(data).splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out.setdefault(key.strip().lower(), value.strip())
        return out
    return None


def _version(venv: Mapping[str, str] | None, exe: str) -> str:
    """X.Y of the interpreter: pyvenv.cfg's version, else the executable's name (python3.11)."""
    for text in (
        (venv or {}).get("version") or (venv or {}).get("version_info") or "",
        os.path.basename(exe).removeprefix("python"),
    ):
        found = re.match(r"(\d+)\.(\d+)", text)
        if found:
            return f"{found[1]}.{found[2]}"
    raise PythonUnknown(f"cannot tell the version of {exe} without running it")


def _landmark(start: str, platlibdir: str, version: str) -> str:
    """The base prefix: the first folder up from `start` holding the stdlib's os.py."""
    folder = start
    while True:
        lib = f"{folder}/{platlibdir}/python{version}"
        if os.path.isfile(f"{lib}/os.py") or os.path.isfile(f"{lib}/os.pyc"):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            raise PythonUnknown(f"no Python {version} standard library above {start}")
        folder = parent


def _path0(options: _Options, env: Mapping[str, str], cwd: str) -> str | None:
    """sys.path[0]: the script's folder, or the working folder for -m, -c and stdin."""
    if "P" in options.flags or "I" in options.flags or env.get("PYTHONSAFEPATH"):
        return None
    if options.mode == "script" and options.script is not None:
        script = os.path.realpath(_abspath(options.script, cwd))
        return script if os.path.isdir(script) else os.path.dirname(script)
    return cwd


def _site(
    paths: list[str],
    prefixes: list[str],
    base: str,
    version: str,
    platlibdir: str,
    env: Mapping[str, str],
    user: bool,
    unsure: list[str],
) -> list[str]:
    """What site.py adds: duplicates gone, the user site, the site folders with their .pth files."""
    out = list(dict.fromkeys(paths))
    known = {p for p in out if os.path.exists(p)}
    debian = _debian(base, platlibdir, version)
    venv = prefixes[0] != base
    if venv:
        # site.venv() adds the venv's own folders first: they win over the user site
        for folder in _site_packages(prefixes[:1], version, platlibdir, debian, venv):
            if os.path.isdir(folder):
                _add_site_dir(folder, out, known, unsure)
    if user:
        home = env.get("HOME")
        userbase = env.get("PYTHONUSERBASE") or (f"{home}/.local" if home else None)
        if userbase is None:
            unsure.append("no HOME in its environment: its user site is not known")
        else:
            folder = f"{userbase}/lib/python{version}/site-packages"
            if os.path.isdir(folder):
                _add_site_dir(folder, out, known, unsure)
    for folder in _site_packages(prefixes, version, platlibdir, debian, venv):
        if os.path.isdir(folder):
            _add_site_dir(folder, out, known, unsure)
    return out


def _debian(base: str, platlibdir: str, version: str) -> bool:
    """Whether the interpreter's own site.py is Debian's (its packages in dist-packages)."""
    try:
        # The interpreter's own file, a link in some distributions: only a yes or no is kept.
        data = read_small(f"{base}/{platlibdir}/python{version}/site.py", SITE_PY, follow=True)
    except Unread as exc:
        raise PythonUnknown(f"whose site.py it runs: {exc}") from None
    return data is not None and b"dist-packages" in data


def _site_packages(
    prefixes: Sequence[str], version: str, platlibdir: str, debian: bool, venv: bool
) -> list[str]:
    """site.getsitepackages() for these prefixes, CPython's or Debian's."""
    libdirs = [platlibdir] if platlibdir == "lib" else [platlibdir, "lib"]
    out: list[str] = []
    for prefix in dict.fromkeys(p for p in prefixes if p):
        if not debian:
            out += [f"{prefix}/{lib}/python{version}/site-packages" for lib in libdirs]
            continue
        if venv:
            out.append(f"{prefix}/lib/python{version}/site-packages")
        out.append(f"{prefix}/local/lib/python{version}/dist-packages")
        out.append(f"{prefix}/lib/python3/dist-packages")
        out += [f"{prefix}/{lib}/python{version}/dist-packages" for lib in libdirs]
    return out


def _add_site_dir(folder: str, out: list[str], known: set[str], unsure: list[str]) -> None:
    """site.addsitedir: the folder, then each .pth file's folders, by file name."""
    if folder not in known:
        out.append(folder)
        known.add(folder)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
    except OSError:
        return
    for name in names:
        try:
            # A link is followed (stow and Nix link them); what is read is never stored
            # as text, only the folders it names that exist.
            data = read_small(f"{folder}/{name}", PTH_BYTES, follow=True)
        except Unread as exc:
            # Which folders it adds is unknown: so is every distribution on the path.
            raise PythonUnknown(str(exc)) from None
        for line in as_text(data or b"").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith(("import ", "import\t")):
                unsure.append(f"{folder}/{name} runs code at start, which may change its path")
                continue
            entry = _abspath(os.path.join(folder, line.rstrip()), "/")
            if entry not in known and os.path.exists(entry):
                out.append(entry)
                known.add(entry)


def _existing(paths: Sequence[str], unsure: list[str]) -> list[str]:
    """The folders of the path that exist, in order; an archive on it is said to be unread."""
    out = []
    for entry in dict.fromkeys(paths):
        if os.path.isdir(entry):
            out.append(entry)
        elif os.path.isfile(entry):
            unsure.append(f"{entry} is an archive on its path: its distributions are not read")
    return out


def _abspath(path: str, cwd: str) -> str:
    """os.path.abspath as the process would compute it, from its own working folder."""
    return os.path.normpath(os.path.join(cwd, path))
