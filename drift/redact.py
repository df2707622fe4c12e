"""Keep secrets out of drift's database, terminal and reports.

A secret is found three ways:

- by **name**: an env var, exported variable, unit ``Environment=`` entry or
  command-line flag one of whose *words* is a secret word (KEY, TOKEN,
  SECRET, PASS, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL(S), CREDS, AUTH,
  AUTHORIZATION, COOKIE, SESSION, SIGNATURE, DSN, or a compound that starts
  or ends with one: APIKEY, KEYFILE, OAUTH), or that ends in the word PWD
  (``MYSQL_PWD``); plus ``[secrets] redact``, minus ``[secrets] allow``;
- by **format**: a value shaped like a known token, whatever its name:
  Hugging Face, OpenAI, Anthropic, AWS key id, GitHub, Slack, JWT, Stripe
  (``sk_live_``, ``rk_live_``, ``sk_test_``), Google API key (``AIza``),
  GitLab (``glpat-``), npm (``npm_``), PyPI (``pypi-AgEIcHlwaS5vcmc``), a
  Slack webhook's path, a crypt(3) password hash (``$1$ $5$ $6$ $2a$ $2b$
  $2y$ $y$ $gy$ $7$ $argon2id$``), a PEM private key, ``Bearer``/``Basic``;
- by **context**: the password of a URL (``postgres://user:PW@host``), the
  value after a secret flag (``--api-key X``, ``--password=X``), of a secret
  assignment (``HF_TOKEN=X``, ``api_key = "X"``), JSON key or ``Name: value``
  line, and the password option of tools whose short option is one:
  ``mysql``/``mysqldump``/``mysqladmin``/``mariadb*`` ``-pX`` (attached: a
  separate word after ``-p`` is the database), ``redis-cli -a X``,
  ``sshpass -p X``.

Every string a record stores is searched: values, every string of a
provenance (a command's ``run`` line too, whatever the fact), subjects and
keys (a file name, a flag word), collection errors, and the stat cache and
config scope beside them. A fact that is a secret (or whose whole value is a
secret found elsewhere) is stored as ``hmac-sha256:<32 hex>`` (a keyed digest,
so drift can say "changed" without showing either value) with
``secret=True``. A secret inside a larger text (argv, a script, command
output, provenance, a subject) is replaced by ``[redacted:<8 hex>]``, the
first hex digits of the same keyed digest: two different secrets read
differently, one secret reads the same everywhere and in every record, so a
masked file name stays one subject. Once a value of six or more characters is
known to be secret, it is masked wherever else it appears; a shorter or empty
one is masked only where it was found.

Known false positives, accepted because hiding a value only costs "changed"
instead of the value: ``SSH_AUTH_SOCK``-like paths in names with AUTH or
SESSION (a few well-known ones are exempt), ``--ssl-keyfile`` (a path). Not
redacted on purpose: a secret word inside another (``MONKEYPATCH``) and
words beside one (``HATHORA_PRIVATE_IP``, ``*_PRIVATE_HOST``: PRIVATE alone
is not secret, ``PRIVATE_KEY`` is), ``KEYBOARD``/``KEYMAP``/``KEYWORD``,
``AUTHOR`` (``GIT_AUTHOR_NAME``), ``AUTHORITY``, ``BYPASS``, ``PASSTHROUGH``,
``PASSENGER``, ``TOKENIZER`` and token *counts* such as
``--max-total-tokens`` (a plural TOKENS next to MAX, NUM, TOTAL ...), and
``PWD``/``OLDPWD`` (the working folder).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from drift.facts import CollectionError, Fact, FactBlock

if TYPE_CHECKING:
    from drift.config import SecretsSpec

DIGEST_PREFIX = "hmac-sha256:"
MARKER_FORMAT = "[redacted:{}]"
# Shorter known values ("1", "on", "8000") would mask half of every text.
MIN_KNOWN_LENGTH = 6
KEY_BYTES = 32


def shown_secret(stored: str | None) -> str:
    """How a secret fact is shown: ``[redacted:<8 hex>]``, the same marker as inside a text.

    `stored` is the fact's ``hmac-sha256:`` digest; both forms start with the
    same hex digits, so a secret reads the same in a value, a title and a diff.
    """
    hexed = (stored or "").rsplit(":", 1)[-1][:8]
    return MARKER_FORMAT.format(hexed) if hexed else "[redacted]"


# Keys whose values are hashes, sizes, modes and ids: never secret, and
# masking a known secret inside a hex digest would corrupt it (a six-digit
# secret turns up in about one sha256 in 300k by chance). Skipping them is also
# what keeps a record of 40k file facts cheap.
SKIP_KEYS = frozenset(
    {
        "sha256",
        "size",
        "mode",
        "mtime",
        "inode",
        "head",
        "pid",
        "started_at",
        "exit",
        "ok",
        "dirty",
    }
)

# --- names -----------------------------------------------------------------

# Roots of secret words; a cheap test on the whole name before it is split.
_SECRET_ROOT = re.compile(r"KEY|TOKEN|SECRET|PASS|CRED|AUTH|COOKIE|SESSION|SIGNATURE|DSN|PWD")
# A word is secret when it is one of these, or a compound that starts or ends
# with one (APIKEY, ACCESSTOKEN, KEYFILE, PASSWORDFILE, OAUTH); a root in the
# middle of a word (MONKEYPATCH) or a word merely beside one (the PRIVATE of
# HATHORA_PRIVATE_IP) is not.
_SECRET_WORD = re.compile(
    r"\w*(?:KEYS?|TOKENS?|SECRETS?|PASS|PASSWORDS?|PASSWD|PASSPHRASE|PASSCODE|CREDENTIALS?"
    r"|CREDS|AUTH[NZ]?|AUTHORIZATION|COOKIES?|SESSION|SIGNATURE|DSN)"
    r"|(?:KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|SIGNATURE|DSN)\w*"
)
# Whole words that are or start with a secret word but name nothing secret.
_BENIGN_WORD = re.compile(
    r"KEYBOARDS?|KEYMAPS?|KEYWORDS?|HOTKEYS?|AUTHORS?|AUTHORED|AUTHORITY|AUTHORITIES"
    r"|BYPASS\w*|COMPASS|PASSTHRU|PASSTHROUGH|PASSIVE|PASSENGERS?|\w*TOKENIZ\w*"
)
# TOKENS next to one of these words is a count (--max-total-tokens), not a
# list of credentials (API_TOKENS).
_COUNT_WORDS = frozenset(
    {
        "MAX",
        "MIN",
        "NUM",
        "TOTAL",
        "COUNT",
        "LIMIT",
        "BUDGET",
        "LEN",
        "LENGTH",
        "SIZE",
        "PER",
    }
)
# Well-known session plumbing: paths and ids, not credentials.
_BENIGN_NAMES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
    }
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _name_words(name: str) -> list[str]:
    return [w.upper() for w in _WORD_SPLIT.split(_CAMEL.sub("_", name)) if w]


def _secret_by_words(name: str) -> bool:
    words = _name_words(name)
    for word in words:
        if word == "PWD":
            # PWD alone is the working folder; MYSQL_PWD and DB_PWD are passwords.
            if len(words) > 1 and words[-1] == "PWD":
                return True
            continue
        if not _SECRET_WORD.fullmatch(word) or _BENIGN_WORD.fullmatch(word):
            continue
        if (
            word.endswith("TOKENS")
            and not _SECRET_ROOT.search(word[:-6])
            and _COUNT_WORDS.intersection(words)
        ):
            continue
        return True
    return False


# --- values ----------------------------------------------------------------

# Known token formats, each anchored so it does not fire inside a longer word
# ("task-..." is not an OpenAI key).
TOKEN_FORMATS = (
    r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"(?<![A-Za-z0-9_-])sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key id
    r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
    r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained
    r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{2,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",  # JWT
    r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",  # Google API key
    r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",  # npm
    r"(?<![A-Za-z0-9_-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{16,}",  # PyPI
    # a Slack webhook's path is its credential; the host stays readable
    r"(?<=hooks\.slack\.com/services/)T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]{8,}",
    # crypt(3) password hashes: $1$ md5, $5$/$6$ sha, $2?$ bcrypt, $y$/$gy$
    # yescrypt, $7$ scrypt, $argon2..$: an id, then a salt or cost field, then a
    # long hash; so a shell's "$1$2" or "$1$HOME/.config/app" is not one
    r"(?<![\w$])\$(?:1|5|6|7|y|gy|2[abxy]|argon2(?:id|i|d))\$(?:[A-Za-z0-9./=,+-]+\$)+"
    r"[A-Za-z0-9./+]{16,}",
)
_PEM = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)"
_AUTH_VALUE = r"[A-Za-z0-9._~+/-]{8,}=*"
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
_JSON_STR = r"(?:[^\"\\\n]|\\.)*"
_FLAG = r"--?[A-Za-z][\w.-]*"

# Each scanner runs only when a cheap substring check says it might match
# (most values are short and match none). The context scanner consumes only a
# name and captures the value in a lookahead, so a token hidden inside a value
# that turns out not to be secret ("INFO: got hf_...") is still found.
_PEM_SCAN = re.compile(_PEM)
_TOKEN_SCAN = re.compile("|".join(TOKEN_FORMATS))
_AUTH_SCAN = re.compile(rf"\b(?i:bearer|basic)[ \t]+(?P<auth>{_AUTH_VALUE})")
# scheme://user:PASSWORD@ ; greedy so an unencoded @ stays in the password
_URL_SCAN = re.compile(
    r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\"'<>\[\]]*:(?P<urlpw>[^\s/?#\"'<>]+)@"
)
_CONTEXT_SCAN = re.compile(
    "|".join(
        [
            # JSON argv: "--token", "X"   and   "--token=X" ; a following "--flag" is a flag
            rf"(?<![\w-])(?P<jf>{_FLAG})\",[ \t]*\"(?=(?!-[^\d.\"])(?P<jfv>{_JSON_STR})\")",
            rf"\"(?P<jef>{_FLAG})=(?=(?P<jefv>{_JSON_STR})\")",
            # shell: --token X, --token=X, --token \<newline> X ; a following -x is a flag
            rf"(?<![\w-])(?P<sf>{_FLAG})(?:=|[ \t]+(?:\\\r?\n[ \t]*)?)"
            rf"(?=(?P<sfv>{_QUOTED}|[^\s'\"\\-][^\s'\"]*))",
            # JSON object: "api_key": "X"
            rf"\"(?P<jk>[A-Za-z_][\w.-]*)\"[ \t]*:[ \t]*\"(?=(?P<jkv>{_JSON_STR})\")",
            # YAML / HTTP header line: api_key: X   Authorization: Bearer X
            rf"^[ \t]*(?:-[ \t]+)?(?P<yk>[A-Za-z_][\w.-]*)[ \t]*:[ \t]+"
            rf"(?=(?P<ykv>{_QUOTED}|[^\s'\"#][^\n]*?)(?:[ \t]+\#|[ \t\r]*$))",
            # assignment: HF_TOKEN=X, export DB_PASS="X", api_key = 'X', ?token=X ; in
            # "API_KEY= cmd" the key is empty and cmd is a command
            rf"(?<![\w$.-])(?P<an>[A-Za-z_][A-Za-z0-9_]*)(?:=|[ \t]+=[ \t]*)"
            rf"(?=(?P<av>{_QUOTED}|[^\s'\";&|)=][^\s'\";&|)]*))",
        ]
    ),
    re.MULTILINE,
)
# (name group, value group, value may be a shell $reference left alone)
_CONTEXT_GROUPS = (
    ("jf", "jfv", False),
    ("jef", "jefv", False),
    ("sf", "sfv", True),
    ("jk", "jkv", False),
    ("yk", "ykv", True),
    ("an", "av", True),
)
# Tools whose short option takes a password: mysql's -pSECRET (attached; a
# separate word after -p is the database), redis-cli's -a SECRET, sshpass's
# -p SECRET. A command runs to the end of its line (backslash continuations
# included) or to ; & |.
_TOOL_SCAN = re.compile(
    r"(?<![\w.-])(?P<tool>mysql(?:admin|dump|check|import|show|slap|binlog)?"
    r"|mariadb(?:-?(?:admin|dump|check|import|show|slap|binlog))?|redis-cli|sshpass)"
    r"(?![\w.-])"
)
_TOOL_ARGS = re.compile(r"(?:[^\n;&|\\]|\\\r?\n|\\.)*")
_TOOL_VALUE = r"(?P<v>(?:[^\s\"'\\]|\\.)+)"
# JSON argv separates words by '", "'
_NEXT_WORD = r"(?:[ \t]+|\",[ \t]*\")"
_TOOL_OPTIONS = {
    "mysql": re.compile(rf"(?<=[\s\"'])(?P<flag>-p){_TOOL_VALUE}"),
    "redis-cli": re.compile(rf"(?<=[\s\"'])(?P<flag>-a){_NEXT_WORD}(?!-){_TOOL_VALUE}"),
    "sshpass": re.compile(rf"(?<=[\s\"'])(?P<flag>-p){_NEXT_WORD}?(?!-){_TOOL_VALUE}"),
}
_FULL_FORMAT = re.compile(
    rf"{_PEM}|(?:{'|'.join(TOKEN_FORMATS)})|(?i:bearer|basic)[ \t]+(?P<auth>{_AUTH_VALUE})"
)
_AUTH_SCHEME = re.compile(r"(?i:bearer|basic|token)[ \t]+(?=\S)")
_ALREADY_REDACTED = re.compile(r"\[redacted:[0-9a-f]{8}\]|hmac-sha256:[0-9a-f]{32}")
# what a crypt hash starts with; a text with "$" is searched for it before the full scan
_CRYPT_HINT = re.compile(r"\$(?:[1567y]|gy|2[abxy]|argon2)")


# Chains of `in` are several times faster than one regex alternation here.
def _may_hold_token(text: str) -> bool:
    return (
        "hf_" in text
        or "sk-" in text
        or "AKIA" in text
        or "ASIA" in text
        or "eyJ" in text
        or "xox" in text
        or "ghp_" in text
        or "gho_" in text
        or "ghs_" in text
        or "ghu_" in text
        or "ghr_" in text
        or "github_pat_" in text
        or "k_live_" in text
        or "k_test_" in text
        or "AIza" in text
        or "glpat-" in text
        or "npm_" in text
        or "pypi-" in text
        or "hooks.slack.com" in text
        or ("$" in text and _CRYPT_HINT.search(text) is not None)
    )


def _may_hold_shape(text: str) -> bool:
    """Cheap pre-check of `_scan_shapes`: a URL, a token format or a private key."""
    return "://" in text or _may_hold_token(text) or "PRIVATE KEY" in text


def _may_hold_tool(text: str) -> bool:
    return "mysql" in text or "mariadb" in text or "redis-cli" in text or "sshpass" in text


def _may_hold_auth(text: str) -> bool:
    return "earer" in text or "EARER" in text or "asic" in text or "ASIC" in text


def _may_hold_format(text: str) -> bool:
    """Cheap pre-check: could `text` hold a token format, auth header or private key?"""
    return _may_hold_token(text) or "PRIVATE KEY" in text or _may_hold_auth(text)


def _looks_random(token: str) -> bool:
    """A Bearer/Basic credential, not an English word ("Basic configuration")."""
    if any(c.isdigit() or c in "+/=._~-" for c in token):
        return True
    return any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)


Span = tuple[int, int, str]  # start, end, the secret text (== text[start:end])
Item = Fact | FactBlock | CollectionError
_V = TypeVar("_V")


@dataclass
class _Memo:
    """What one redaction has worked out, by text and by provenance dict (collectors share them)."""

    scans: dict[str, Sequence[Span]] = field(default_factory=dict)  # text -> its spans
    texts: dict[str, str] = field(default_factory=dict)  # text -> masked ("" if unchanged)
    names: dict[str, str] = field(default_factory=dict)  # subject or key -> masked
    learned: set[int] = field(default_factory=set)  # ids of provenances searched
    shaped: dict[int, bool] = field(default_factory=dict)  # id of a block's subjects -> may hold
    provenances: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> masked


class Redactor:
    """Replaces secrets in facts and texts by keyed digests; see the module docstring.

    `spec.redact` adds names (exact or fnmatch globs, case-insensitive, with or
    without the leading dashes of a flag) that are always secret; `spec.allow`
    names are never secret *by name*, but a value in a known token format, a
    URL password or a known secret inside them is still redacted. A name in
    both lists is redacted.
    """

    def __init__(self, key: bytes, spec: SecretsSpec | None = None) -> None:
        if not key:
            raise ValueError("the redaction key must not be empty")
        self._key = key
        self._redact = tuple(p.casefold() for p in spec.redact) if spec else ()
        self._allow = tuple(p.casefold() for p in spec.allow) if spec else ()
        self._names: dict[str, bool] = {}
        self._name_hint = _name_hint(self._redact)
        self._hex: dict[str, str] = {}
        # every spelling of a known secret -> its marker
        self._known: dict[str, str] = {}
        self._literal_re: re.Pattern[str] | None = None
        # what a tool's context showed: mysql's -pSECRET as a flag name -> masked,
        # redis-cli's (-a, SECRET) as a flag and its value
        self._secret_flag_names: dict[str, str] = {}
        self._secret_flag_values: set[tuple[str, str]] = set()

    # -- classification ----------------------------------------------------

    def is_secret_name(self, name: str) -> bool:
        """True if an env var or flag called `name` holds a secret, by name alone."""
        cached = self._names.get(name)
        if cached is None:
            cached = self._names[name] = self._classify_name(name)
        return cached

    def _classify_name(self, name: str) -> bool:
        if not self._redact and not self._allow and not _SECRET_ROOT.search(name.upper()):
            return False  # the common case, decided without splitting words
        folded = name.casefold()
        bare = folded.lstrip("-")
        if any(
            fnmatch.fnmatchcase(folded, p) or fnmatch.fnmatchcase(bare, p.lstrip("-"))
            for p in self._redact
        ):
            return True
        if any(
            fnmatch.fnmatchcase(folded, p) or fnmatch.fnmatchcase(bare, p.lstrip("-"))
            for p in self._allow
        ):
            return False
        if name.upper() in _BENIGN_NAMES:
            return False
        return _secret_by_words(name)

    def looks_like_secret_value(self, value: str) -> bool:
        """True if the whole value (trimmed) is in a known token format."""
        if not _may_hold_format(value):
            return False
        match = _FULL_FORMAT.fullmatch(value.strip())
        if match is None:
            return False
        auth = match.group("auth")
        return auth is None or _looks_random(auth)

    # -- digests -----------------------------------------------------------

    def _hexdigest(self, value: str) -> str:
        hexed = self._hex.get(value)
        if hexed is None:
            raw = value.encode("utf-8", "surrogatepass")
            hexed = hmac.new(self._key, raw, hashlib.sha256).hexdigest()
            self._hex[value] = hexed
        return hexed

    def digest(self, value: str) -> str:
        """The stored form of a secret value: ``hmac-sha256:`` and 32 hex digits."""
        return DIGEST_PREFIX + self._hexdigest(value)[:32]

    def marker(self, value: str) -> str:
        """What a secret inside a larger text becomes: ``[redacted:<8 hex>]``."""
        return MARKER_FORMAT.format(self._hexdigest(value)[:8])

    def remember_secret(self, value: str) -> None:
        """Mask `value` from now on wherever it appears (if six characters or longer)."""
        if len(value) < MIN_KNOWN_LENGTH or value in self._known:
            return
        mark = self.marker(value)
        self._known[value] = mark
        # argv and JSON output hold the value JSON-escaped (argv with \uXXXX escapes)
        for ascii_only in (False, True):
            escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
            if escaped != value:
                self._known.setdefault(escaped, mark)
        self._literal_re = None

    # -- scanning ----------------------------------------------------------

    def _scan(self, text: str) -> Sequence[Span]:
        """Spans of `text` that are secret by format or context (not by known value)."""
        # Allocating nothing for the common no-hit case keeps the garbage
        # collector from walking 40k facts several times per record.
        tool = _may_hold_tool(text)
        if not (
            tool or "://" in text or _may_hold_format(text) or self._name_hint.search(text.upper())
        ):
            return ()
        spans = list(self._scan_shapes(text))
        if _may_hold_auth(text):
            spans.extend(
                (m.start("auth"), m.end("auth"), m.group("auth"))
                for m in _AUTH_SCAN.finditer(text)
                if _looks_random(m.group("auth"))
            )
        if tool:
            self._scan_tools(text, spans)
        if self._name_hint.search(text.upper()):
            self._scan_context(text, spans)
        return spans

    def _scan_shapes(self, text: str) -> Sequence[Span]:
        """Spans of `text` that are secret by shape alone: URL passwords, tokens, private keys.

        What a file name or a fact's subject is searched for: a name holds no
        flags or assignments, and searching it for them would hide path words.
        """
        url = "://" in text
        token = _may_hold_token(text)
        pem = "PRIVATE KEY" in text
        if not (url or token or pem):
            return ()
        spans: list[Span] = []
        if pem:  # a flag "name" from argv can be a whole key: "--opt", "-----BEGIN ..."
            spans.extend((m.start(), m.end(), m.group()) for m in _PEM_SCAN.finditer(text))
        if url:
            spans.extend(
                (m.start("urlpw"), m.end("urlpw"), m.group("urlpw"))
                for m in _URL_SCAN.finditer(text)
                if not _ALREADY_REDACTED.fullmatch(m.group("urlpw"))
            )
        if token:
            spans.extend((m.start(), m.end(), m.group()) for m in _TOKEN_SCAN.finditer(text))
        return spans

    def _scan_tools(self, text: str, spans: list[Span]) -> None:
        for command in _TOOL_SCAN.finditer(text):
            tool = command.group("tool")
            family = "mysql" if tool.startswith(("mysql", "mariadb")) else tool
            # the arguments run to the end of the command, over any other tool's name
            # (several commands in one JSON argv or one quoted string)
            args = _TOOL_ARGS.match(text, command.end())
            assert args is not None  # it matches the empty string
            base = args.start()
            for m in _TOOL_OPTIONS[family].finditer(args.group()):
                value = m.group("v")
                if value.startswith("$") or _ALREADY_REDACTED.fullmatch(value):
                    continue  # -p"$DB_PASS" in a script names the password, it is not one
                spans.append((base + m.start("v"), base + m.end("v"), value))
                flag = m.group("flag")
                if m.start("v") == m.end("flag"):
                    # -pSECRET: the flag's own name holds the secret (flag:-pSECRET)
                    self._secret_flag_names[flag + value] = flag + self.marker(value)
                else:
                    self._secret_flag_values.add((flag, value))

    def _scan_context(self, text: str, spans: list[Span]) -> None:
        for m in _CONTEXT_SCAN.finditer(text):
            for name_group, value_group, shell in _CONTEXT_GROUPS:
                name = m.group(name_group)
                if name is None:
                    continue
                value = m.group(value_group)
                if not value or not self.is_secret_name(name):
                    break
                start, end = m.start(value_group), m.end(value_group)
                quote = value[0]
                if len(value) >= 2 and quote in "\"'" and value[-1] == quote:
                    start, end, value = start + 1, end - 1, value[1:-1]
                scheme = _AUTH_SCHEME.match(value)
                if scheme:  # keep "Bearer " readable, mask what follows
                    start, value = start + scheme.end(), value[scheme.end() :]
                if (
                    value
                    and not _ALREADY_REDACTED.fullmatch(value)
                    and not (shell and quote != "'" and value.startswith("$"))
                ):
                    spans.append((start, end, value))
                break

    def _literal_spans(self, text: str) -> Sequence[Span]:
        if not self._known:
            return ()
        if self._literal_re is None:
            # longest first, so a secret that contains another is masked whole
            alternatives = sorted(self._known, key=len, reverse=True)
            self._literal_re = re.compile("|".join(map(re.escape, alternatives)))
        if not self._literal_re.search(text):
            return ()
        return [(m.start(), m.end(), m.group()) for m in self._literal_re.finditer(text)]

    def _apply(self, text: str, *found: Sequence[Span], glob: bool = False) -> str:
        """`text` with each span (overlapping ones merged) replaced by its marker.

        In a `glob` the marker's brackets are escaped (``[[]redacted:...]``), so
        the pattern still matches the masked names.
        """
        if not any(found):
            return text
        spans = sorted(span for group in found for span in group)
        merged: list[list[int]] = []
        for start, end, _ in spans:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out: list[str] = []
        pos = 0
        for start, end in merged:
            secret = text[start:end]
            out.append(text[pos:start])
            mark = self._known.get(secret) or self.marker(secret)
            out.append(mark.replace("[", "[[]") if glob else mark)
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def mask_text(self, text: str) -> str:
        """`text` with known secrets, token formats, URL passwords and secret flag values masked."""
        return self._apply(text, self._scan(text), self._literal_spans(text))

    def mask_name(self, name: str) -> str:
        """A subject or path with secrets in it masked: stable across records, still unique.

        Only shapes (token formats, URL passwords, private keys) and known
        secrets count here.
        """
        return self._apply(name, self._scan_shapes(name), self._literal_spans(name))

    def _mask_key(self, key: str, memo: _Memo) -> str:
        """A fact's key masked as a text is: any word of argv that starts with "-" is a flag."""
        if key.startswith("flag:"):
            hidden = self._secret_flag_names.get(key[5:])
            if hidden is not None:  # mysql's -pSECRET
                return "flag:" + hidden
        return self._mask_memo(key, memo)

    def mask_names(self, names: list[str], shaped: bool | None = None) -> list[str]:
        """`names` (a block's 40k file subjects) masked; the same list if none holds a secret.

        `shaped` says whether a name may hold a token shape, if already known.
        """
        joined = "\n".join(names)
        if shaped is None:
            shaped = _may_hold_shape(joined)
        if not (shaped or self._holds_known(joined)):
            return names
        masked = [self.mask_name(name) for name in names]
        return names if all(m is n for m, n in zip(masked, names, strict=True)) else masked

    def mask_glob(self, pattern: str) -> str:
        """A file glob with secrets masked as in `mask_name`, matching the masked file names."""
        return self._apply(
            pattern, self._scan_shapes(pattern), self._literal_spans(pattern), glob=True
        )

    def without_secret_paths(self, stats: dict[str, _V]) -> dict[str, _V]:
        """`stats` (the stat cache, stored keyed by path) without the paths that hold a secret.

        Such a file is hashed again at every record instead of its path
        reaching the database.
        """
        paths = list(stats)
        masked = self.mask_names(paths)
        if masked is paths:
            return stats
        return {p: stats[p] for p, m in zip(paths, masked, strict=True) if m == p}

    def _holds_known(self, text: str) -> bool:
        # `in` per secret is a memmem each, much faster over a long text than the alternation
        return any(secret in text for secret in self._known)

    def _learn(self, text: str, memo: _Memo, *, shapes_only: bool = False) -> None:
        """Remember every secret found in `text` (once per text), to mask it everywhere."""
        if shapes_only:
            if text in memo.names:
                return
            memo.names[text] = ""  # placeholder: masked in the second pass
            spans = self._scan_shapes(text)
        else:
            if text in memo.scans:
                return
            spans = memo.scans[text] = self._scan(text)
        for _, _, secret in spans:
            self.remember_secret(secret)
            if "%" in secret:
                self.remember_secret(unquote(secret))

    def _learn_any(self, value: Any, memo: _Memo) -> None:
        if isinstance(value, str):
            self._learn(value, memo)
        elif isinstance(value, dict):
            for v in value.values():
                self._learn_any(v, memo)
        elif isinstance(value, list | tuple):
            for v in value:
                self._learn_any(v, memo)

    def _learn_provenance(self, provenance: dict[str, Any], memo: _Memo) -> None:
        if provenance and id(provenance) not in memo.learned:
            memo.learned.add(id(provenance))
            self._learn_any(provenance, memo)

    def _mask_memo(self, text: str, memo: _Memo) -> str:
        # the same values (PATH, a provenance file name) recur across services
        # (memo holds "" for unchanged, so an unchanged text comes back as the same object)
        masked = memo.texts.get(text)
        if masked is None:
            spans = memo.scans.get(text)
            if spans is None:
                spans = self._scan(text)
            masked = self._apply(text, spans, self._literal_spans(text))
            memo.texts[text] = "" if masked is text else masked
        return masked or text

    def _mask_name_memo(self, name: str, memo: _Memo) -> str:
        masked = memo.names.get(name)
        if not masked:
            masked = self.mask_name(name)
            memo.names[name] = masked
        return masked

    def _mask_any(self, value: Any, memo: _Memo) -> Any:
        """`value` with every string inside masked; the very same object if nothing was."""
        if isinstance(value, str):
            return self._mask_memo(value, memo)
        if isinstance(value, dict):
            copy: dict[Any, Any] | None = None
            for k, v in value.items():
                masked = self._mask_any(v, memo)
                if masked is not v:
                    if copy is None:
                        copy = dict(value)
                    copy[k] = masked
            return value if copy is None else copy
        if isinstance(value, list | tuple):
            masked = [self._mask_any(v, memo) for v in value]
            same = all(m is v for m, v in zip(masked, value, strict=True))
            return value if same else type(value)(masked)
        return value

    def _mask_provenance(self, provenance: dict[str, Any], memo: _Memo) -> dict[str, Any]:
        # collectors share one provenance dict across many facts (a file set's
        # glob, a process's /proc source): mask each dict once
        if not provenance:
            return provenance
        masked = memo.provenances.get(id(provenance))
        if masked is None:
            masked = memo.provenances[id(provenance)] = self._mask_any(provenance, memo)
        return masked

    # -- facts -------------------------------------------------------------

    def redact(self, items: Iterable[Item]) -> list[Item]:
        """Every collected item with its secrets digested or masked, in the same order.

        Values, provenances (every string in them), subjects, keys and error
        messages are all searched. A FactBlock whose keys are all in SKIP_KEYS
        (hashes, sizes, modes) stays a block, its subjects and provenances
        masked; any other block is redacted fact by fact.

        First pass: find secret facts (by name, by format) and learn every
        secret value seen anywhere; second pass: digest the secret facts (and
        those whose whole value is a secret learned elsewhere) and mask the
        rest. The values of facts with keys in SKIP_KEYS and of facts already
        secret are left as they are.
        """
        flat: list[Item] = []
        for item in items:
            if isinstance(item, FactBlock) and not SKIP_KEYS.issuperset(item.keys):
                flat.extend(item)
            else:
                flat.append(item)
        memo = _Memo()
        secret_at: set[int] = set()
        for i, item in enumerate(flat):
            if isinstance(item, Fact):
                if self._learn_fact(item, memo):
                    secret_at.add(i)
            elif isinstance(item, FactBlock):
                for provenance in _distinct(item.provenances):
                    self._learn_provenance(provenance, memo)
                self._learn_names(item.subjects, memo)
            else:
                self._learn(item.subject, memo, shapes_only=True)
                self._learn(item.message, memo)

        out: list[Item] = []
        for i, item in enumerate(flat):
            if isinstance(item, Fact):
                out.append(self._redact_fact(item, i in secret_at, memo))
            elif isinstance(item, FactBlock):
                out.append(self._redact_block(item, memo))
            else:
                out.append(
                    CollectionError(
                        self._mask_name_memo(item.subject, memo),
                        None if item.key is None else self._mask_key(item.key, memo),
                        self.mask_text(item.message),
                    )
                )
        return out

    def _redact_block(self, block: FactBlock, memo: _Memo) -> FactBlock:
        """A block of hashes, sizes and modes: its subjects and provenances masked, values kept."""
        subjects = self.mask_names(block.subjects, memo.shaped.get(id(block.subjects)))
        # a file set's 12k files share a few provenance dicts: mask each once
        masked = {id(p): self._mask_provenance(p, memo) for p in _distinct(block.provenances)}
        if all(masked[id(p)] is p for p in _distinct(block.provenances)):
            if subjects is block.subjects:
                return block
            provenances = block.provenances
        else:
            provenances = [masked[id(p)] for p in block.provenances]
        return FactBlock(block.keys, subjects, block.columns, provenances)

    def redact_facts(self, facts: Iterable[Fact]) -> list[Fact]:
        """Facts with every secret digested or masked; unchanged facts are returned as they are."""
        return self.redact(facts)  # type: ignore[return-value]  # facts in, facts out

    def _learn_fact(self, fact: Fact, memo: _Memo) -> bool:
        """Learn the secrets of one fact; True if its value is a secret by name or format."""
        self._learn(fact.subject, memo, shapes_only=True)
        self._learn(fact.key, memo)
        self._learn_provenance(fact.provenance, memo)
        key = fact.key
        if key in SKIP_KEYS or fact.secret:
            return False
        value = fact.value
        name = _name_in_key(key)
        if (name is not None and self.is_secret_name(name)) or self.looks_like_secret_value(value):
            self.remember_secret(value)
            return True
        self._learn(value, memo)
        return False

    def _learn_names(self, names: list[str], memo: _Memo) -> None:
        # one search of the joined names: 12k file names hold no token shape, as a rule
        shaped = memo.shaped[id(names)] = _may_hold_shape("\n".join(names))
        if shaped:
            for name in names:
                self._learn(name, memo, shapes_only=True)

    def _redact_fact(self, fact: Fact, secret: bool, memo: _Memo) -> Fact:
        subject = self._mask_name_memo(fact.subject, memo)
        key = self._mask_key(fact.key, memo)
        provenance = self._mask_provenance(fact.provenance, memo)
        value = fact.value
        if fact.key in SKIP_KEYS or fact.secret:
            masked = value
        elif secret or value in self._known or self._secret_flag_value(fact.key, value):
            if isinstance(fact.provenance.get("possible"), list):
                provenance = self._digest_possible(fact.provenance, provenance)
            return Fact(subject, key, self.digest(value), provenance, secret=True)
        else:
            masked = self._mask_memo(value, memo)
        if (
            masked is value
            and provenance is fact.provenance
            and subject is fact.subject
            and key is fact.key
        ):
            return fact
        return Fact(subject, key, masked, provenance, fact.secret)

    def _secret_flag_value(self, key: str, value: str) -> bool:
        """True for ``flag:-a`` whose value a tool's context showed to be a password."""
        return (
            bool(self._secret_flag_values)
            and key.startswith("flag:")
            and (key[5:], value) in self._secret_flag_values
        )

    def _digest_possible(self, original: dict[str, Any], masked: dict[str, Any]) -> dict[str, Any]:
        """A secret script value's possibilities: each literal as a keyed digest, never the text.

        The analysis can still tell which line gave a live secret (whose
        digest is the same) without either value being stored.
        """
        out = dict(masked)
        listed: list[dict[str, Any]] = []
        for raw, shown in zip(original["possible"], masked.get("possible") or [], strict=False):
            entry = {k: v for k, v in shown.items() if k != "match"} if shown else {}
            match = raw.get("match") if isinstance(raw, dict) else None
            if isinstance(match, list) and all(isinstance(part, str) for part in match):
                entry["digest"] = self.digest("".join(match))
            listed.append(entry)
        out["possible"] = listed
        return out


def _distinct(provenances: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Each provenance dict once, by identity (a block's files share a few)."""
    return dict(zip(map(id, provenances), provenances, strict=True)).values()


def _name_hint(redact: tuple[str, ...]) -> re.Pattern[str]:
    """A fast search for anything in an upper-cased text that could be a secret name."""
    hints = [_SECRET_ROOT.pattern]
    for pattern in redact:
        # the longest literal run of each configured glob must appear in the name
        plain = re.sub(r"\[[^\]]*\]", "*", pattern.lstrip("-"))
        longest = max(re.split(r"[*?]+", plain), key=len)
        if not longest:
            return re.compile("")  # a bare "*": every text may hold a secret name
        hints.append(re.escape(longest.upper()))
    return re.compile("|".join(hints))


def _name_in_key(key: str) -> str | None:
    """The name in ``env:NAME``, ``export:NAME``, ``unit:environment:NAME``, ``flag:--NAME``.

    Only these keys are judged by name; any other key by its value alone.
    """
    head, _, rest = key.partition(":")
    if head in ("env", "export", "flag"):
        return rest
    if head == "unit" and rest.startswith("environment:"):
        return rest[len("environment:") :]
    return None


def load_or_create_key(path: Path) -> bytes:
    """The per-install redaction key: 32 random bytes in a 0600 file, created on first use.

    Read as `drift.keyfile.load_key` reads it (never through a symlink, never
    from a FIFO or device, a regular file of 32 bytes owned by whoever runs
    drift); `load_key` also says whether the file's mode exposes it.
    """
    from drift.keyfile import load_key

    return load_key(path).key
