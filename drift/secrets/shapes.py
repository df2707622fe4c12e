"""The catalogue of secrets: which names hold one, which values look like one, where they hide.

A secret is found three ways:

- by **name**: an env var, exported variable, unit ``Environment=`` entry or
  command-line flag one of whose *words* is a secret word (KEY, TOKEN,
  SECRET, PASS, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL(S), CREDS, AUTH,
  AUTHORIZATION, COOKIE, SESSION, SIGNATURE, DSN, or a compound that starts
  or ends with one: APIKEY, KEYFILE, OAUTH), or that ends in the word PWD
  (``MYSQL_PWD``); plus ``[secrets] redact``, minus ``[secrets] allow``
  (the `Redactor` applies those);
- by **format**: a value shaped like a known token, whatever its name:
  Hugging Face, OpenAI, Anthropic, AWS key id, GitHub, Slack, JWT, Stripe
  (``sk_live_``, ``rk_live_``, ``sk_test_``), Google API key (``AIza``),
  GitLab (``glpat-``), npm (``npm_``), PyPI (``pypi-AgEIcHlwaS5vcmc``), a
  Slack webhook's path, a crypt(3) password hash (``$1$ $5$ $6$ $2a$ $2b$
  $2y$ $y$ $gy$ $7$ $argon2id$``), a PEM private key, ``Bearer``/``Basic``;
- by **context**: the password of a URL (``postgres://user:PW@host``), the
  value after a secret flag (``--api-key X``, ``--password=X``), of a secret
  assignment (``HF_TOKEN=X``, ``api_key = "X"``, ``db-password=X``,
  ``DB.PASSWORD=X``; a quote left open runs to its line's end), JSON key (in a
  JSON string too) or ``Name: value`` line, a URL's user that has no password
  (``https://TOKEN@host``, not over ssh), and the password option of tools
  whose short option is one:
  ``mysql``/``mysqldump``/``mysqladmin``/``mariadb*`` ``-pX`` (attached: a
  separate word after ``-p`` is the database), ``redis-cli -a X``,
  ``sshpass -p X``.

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

Each function here is pure: a text in, spans (start, end, secret) out. The
`Redactor` decides what to do with them.

The secret of a span is the value itself, its quoting or encoding undone as
the context declares it (`decoded`): a JSON string's escapes (``\\u002f``,
``\\/``), a shell double-quoted word's backslashes, a URL's percent-encoding.
One secret then reads as one tag whether it arrived bare in argv, quoted in a
script, escaped in JSON or encoded in a URL. Only a layer the context shows
is undone, and each decoding is one-to-one on its own encodings: two
different secrets never become one (no case folding, no guessing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from drift.secrets.markers import ALREADY_REDACTED

Span = tuple[int, int, str]  # start, end, the secret (text[start:end] with its encoding undone)


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
# Well-known session plumbing and settings: paths, ids and names, not credentials.
_BENIGN_NAMES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
        # systemd unit settings (a unit file is kept as text): names, not values
        "PASSENVIRONMENT",
        "KEYRINGMODE",
    }
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _name_words(name: str) -> list[str]:
    """The words of a name, upper-cased: ``hfApiToken`` and ``HF_API_TOKEN`` alike."""
    return [w.upper() for w in _WORD_SPLIT.split(_CAMEL.sub("_", name)) if w]


def _secret_by_words(name: str) -> bool:
    """True if a word of the name is a secret word (and not a benign one or a count)."""
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
# a quote whose closing one is not on its line (the first line of a multi-line value, a cut
# text): the value runs to the end of the line
_OPEN_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\\?$|'[^'\n]*$"
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
# scheme://USER@ with no password: over https a lone user is a token (https://TOKEN@host,
# as git and pip take one); over ssh it is a login name, and "git" is everyone's
_URL_USER_SCAN = re.compile(
    r"(?<![\w+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<urluser>[^\s:/?#@\"'<>\[\]]+)@"
)
_LOGIN_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git", "sftp", "scp", "rsync", "ftp"})
_LOGIN_USERS = frozenset({"git", "anonymous", "ftp"})
_CONTEXT_SCAN = re.compile(
    "|".join(
        [
            # JSON argv: "--token", "X"   and   "--token=X" ; a following "--flag" is a flag
            rf"(?<![\w-])(?P<jf>{_FLAG})\",[ \t]*\"(?=(?!-[^\d.\"])(?P<jfv>{_JSON_STR})\")",
            rf"\"(?P<jef>{_FLAG})=(?=(?P<jefv>{_JSON_STR})\")",
            # shell: --token X, --token=X, --token \<newline> X ; a following -x is a flag
            rf"(?<![\w-])(?P<sf>{_FLAG})(?:=|[ \t]+(?:\\\r?\n[ \t]*)?)"
            rf"(?=(?P<sfv>{_QUOTED}|{_OPEN_QUOTED}|[^\s'\"\\-][^\s'\"]*))",
            # JSON object: "api_key": "X"
            rf"\"(?P<jk>[A-Za-z_][\w.-]*)\"[ \t]*:[ \t]*\"(?=(?P<jkv>{_JSON_STR})\")",
            # JSON inside a JSON string: \"api_key\": \"X\"
            r"\\\"(?P<ek>[A-Za-z_][\w.-]*)\\\"[ \t]*:[ \t]*\\\"(?=(?P<ekv>[^\"\\\n]*)\\\")",
            # YAML / HTTP header line: api_key: X   Authorization: Bearer X
            rf"^[ \t]*(?:-[ \t]+)?(?P<yk>[A-Za-z_][\w.-]*)[ \t]*:[ \t]+"
            rf"(?=(?P<ykv>{_QUOTED}|[^\s'\"#][^\n]*?)(?:[ \t]+\#|[ \t\r]*$))",
            # assignment: HF_TOKEN=X, export DB_PASS="X", api_key = 'X', ?token=X,
            # db-password=X, DB.PASSWORD=X, ?X-Amz-Signature=X ; in "API_KEY= cmd" the key
            # is empty and cmd is a command
            rf"(?<![\w$.-])(?P<an>[A-Za-z_][\w.-]*)(?:=|[ \t]+=[ \t]*)"
            rf"(?=(?P<av>{_QUOTED}|{_OPEN_QUOTED}|[^\s'\";&|)=][^\s'\";&|)]*))",
        ]
    ),
    re.MULTILINE,
)
# (name group, value group, value may be a shell $reference left alone, its syntax)
_CONTEXT_GROUPS = (
    ("jf", "jfv", False, "json"),
    ("jef", "jefv", False, "json"),
    ("sf", "sfv", True, "shell"),
    ("jk", "jkv", False, "json"),
    ("ek", "ekv", False, "json"),
    ("yk", "ykv", True, "yaml"),
    ("an", "av", True, "shell"),
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
# what a crypt hash starts with; a text with "$" is searched for it before the full scan
_CRYPT_HINT = re.compile(r"\$(?:[1567y]|gy|2[abxy]|argon2)")


# Chains of `in` are several times faster than one regex alternation here.
def may_hold_token(text: str) -> bool:
    """Cheap pre-check: could `text` hold one of the TOKEN_FORMATS?"""
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


def may_hold_shape(text: str) -> bool:
    """Cheap pre-check of `_scan_shapes`: a URL, a token format or a private key."""
    return "://" in text or may_hold_token(text) or "PRIVATE KEY" in text


def may_hold_tool(text: str) -> bool:
    """Cheap pre-check: could `text` run a tool whose short option takes a password?"""
    return "mysql" in text or "mariadb" in text or "redis-cli" in text or "sshpass" in text


def may_hold_auth(text: str) -> bool:
    """Cheap pre-check: could `text` hold a ``Bearer`` or ``Basic`` credential?"""
    return "earer" in text or "EARER" in text or "asic" in text or "ASIC" in text


def may_hold_format(text: str) -> bool:
    """Cheap pre-check: could `text` hold a token format, auth header or private key?"""
    return may_hold_token(text) or "PRIVATE KEY" in text or may_hold_auth(text)


def looks_random(token: str) -> bool:
    """A Bearer/Basic credential, not an English word ("Basic configuration")."""
    if any(c.isdigit() or c in "+/=._~-" for c in token):
        return True
    return any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)


# --- undoing an encoding -----------------------------------------------------

_SHELL_ESCAPE = re.compile(r"\\([\\\"$`])|\\\r?\n")
_SHELL_BARE_ESCAPE = re.compile(r"\\(.)|\\\r?\n", re.DOTALL)
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PERCENT_ENCODED = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})*", re.DOTALL)


def json_decoded(body: str) -> str:
    """The string a JSON string literal's body (between its quotes) stands for; as it is if
    it is not a valid body (a lone backslash), so nothing is guessed."""
    if "\\" not in body:
        return body
    try:
        decoded = json.loads(f'"{body}"')
    except ValueError:
        return body
    return decoded if isinstance(decoded, str) else body


def shell_decoded(word: str, quote: str) -> str:
    """A shell word's value: inside double quotes only a backslash before a backslash, a
    double quote, ``$``, a backquote or a newline escapes it (as bash reads them), inside
    single quotes nothing, in a bare word every character."""
    if "\\" not in word or quote == "'":
        return word
    if quote == '"':
        return _SHELL_ESCAPE.sub(lambda m: m.group(1) or "", word)
    return _SHELL_BARE_ESCAPE.sub(lambda m: m.group(1) or "", word)


def percent_decoded(text: str) -> str:
    """A URL part's value: each ``%XX`` decoded (as UTF-8); as it is if they are not UTF-8."""
    if not _PERCENT.search(text) or not _PERCENT_ENCODED.fullmatch(text):
        return text  # a lone "%" is no encoding: nothing is guessed
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return text


def whole_secret(value: str, json_text: bool = False) -> str:
    """The secret a whole value holds: a JSON string (when the value is JSON text) decoded,
    surrounding white space and an auth scheme (``Bearer``, ``Basic``, ``Token``) taken off."""
    if json_text and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = None
        if isinstance(decoded, str):
            value = decoded
    secret = value.strip()
    scheme = _AUTH_SCHEME.match(secret)
    if scheme and scheme.end() < len(secret):
        secret = secret[scheme.end() :]
    return secret or value


# --- finding them ----------------------------------------------------------


def has_secret_root(name: str) -> bool:
    """Cheap test before `secret_by_name`: False if no secret word can be in `name`."""
    return _SECRET_ROOT.search(name.upper()) is not None


def secret_by_name(name: str) -> bool:
    """True if an env var or flag called `name` holds a secret by its words alone."""
    if name.upper() in _BENIGN_NAMES:
        return False
    return _secret_by_words(name)


def name_hint(extra: Sequence[str]) -> re.Pattern[str]:
    """A fast search for anything in an upper-cased text that could be a secret name.

    `extra` are configured globs (``[secrets] redact``), casefolded.
    """
    hints = [_SECRET_ROOT.pattern]
    for pattern in extra:
        # the longest literal run of each configured glob must appear in the name
        plain = re.sub(r"\[[^\]]*\]", "*", pattern.lstrip("-"))
        longest = max(re.split(r"[*?]+", plain), key=len)
        if not longest:
            return re.compile("")  # a bare "*": every text may hold a secret name
        hints.append(re.escape(longest.upper()))
    return re.compile("|".join(hints))


def looks_like_token(value: str) -> bool:
    """True if the whole value (trimmed) is in a known token format."""
    if not may_hold_format(value):
        return False
    match = _FULL_FORMAT.fullmatch(value.strip())
    if match is None:
        return False
    auth = match.group("auth")
    return auth is None or looks_random(auth)


def scan_shapes(text: str) -> Sequence[Span]:
    """Spans of `text` that are secret by shape alone: URL passwords, tokens, private keys.

    What a file name or a fact's subject is searched for: a name holds no
    flags or assignments, and searching it for them would hide path words.
    """
    url = "://" in text
    token = may_hold_token(text)
    pem = "PRIVATE KEY" in text
    if not (url or token or pem):
        return ()
    spans: list[Span] = []
    if pem:  # a flag "name" from argv can be a whole key: "--opt", "-----BEGIN ..."
        spans.extend((m.start(), m.end(), m.group()) for m in _PEM_SCAN.finditer(text))
    if url:
        spans.extend(
            (m.start("urlpw"), m.end("urlpw"), percent_decoded(m.group("urlpw")))
            for m in _URL_SCAN.finditer(text)
            if not ALREADY_REDACTED.fullmatch(m.group("urlpw"))
        )
        spans.extend(
            (m.start("urluser"), m.end("urluser"), percent_decoded(m.group("urluser")))
            for m in _URL_USER_SCAN.finditer(text)
            if m.group("scheme").lower() not in _LOGIN_SCHEMES
            and m.group("urluser").lower() not in _LOGIN_USERS
            and not ALREADY_REDACTED.fullmatch(m.group("urluser"))
        )
    if token:
        spans.extend((m.start(), m.end(), m.group()) for m in _TOKEN_SCAN.finditer(text))
    return spans


def scan_auth(text: str) -> Iterator[Span]:
    """The credentials after ``Bearer`` and ``Basic`` that are not English words."""
    return (
        (m.start("auth"), m.end("auth"), m.group("auth"))
        for m in _AUTH_SCAN.finditer(text)
        if looks_random(m.group("auth"))
    )


@dataclass(frozen=True)
class ToolPassword:
    """A password given to a tool's short option: ``mysql -pSECRET``, ``redis-cli -a SECRET``."""

    start: int
    end: int
    value: str
    flag: str  # "-p", "-a"
    attached: bool  # -pSECRET: the flag word itself holds the secret


def tool_passwords(text: str) -> Iterator[ToolPassword]:
    """Every password `text` gives to mysql, mariadb, redis-cli or sshpass on a command line."""
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
            if value.startswith("$") or ALREADY_REDACTED.fullmatch(value):
                continue  # -p"$DB_PASS" in a script names the password, it is not one
            attached = m.start("v") == m.end("flag")
            yield ToolPassword(
                base + m.start("v"), base + m.end("v"), value, m.group("flag"), attached
            )


def context_spans(text: str, is_secret_name: Callable[[str], bool]) -> list[Span]:
    """The values `text` gives to secret names: ``--token X``, ``API_KEY=X``, ``"key": "X"`` ...

    Quotes around a value and an auth scheme before it (``Bearer``) stay
    readable; a shell ``$reference`` names a secret, it is not one. Each
    span's secret is the value decoded as its context says (`_decoded`).
    """
    spans: list[Span] = []
    for m in _CONTEXT_SCAN.finditer(text):
        for name_group, value_group, shell, syntax in _CONTEXT_GROUPS:
            name = m.group(name_group)
            if name is None:
                continue
            value = m.group(value_group)
            if not value or not is_secret_name(name):
                break
            start, end = m.start(value_group), m.end(value_group)
            quote = value[0]
            if len(value) >= 2 and quote in "\"'" and value[-1] == quote:
                start, end, value = start + 1, end - 1, value[1:-1]
            elif quote in "\"'":  # open to the end of its line
                start, value = start + 1, value[1:]
            scheme = _AUTH_SCHEME.match(value)
            if scheme:  # keep "Bearer " readable, mask what follows
                start, value = start + scheme.end(), value[scheme.end() :]
            if (
                value
                and not ALREADY_REDACTED.fullmatch(value)
                and not (shell and quote != "'" and value.startswith("$"))
            ):
                in_query = name_group == "an" and text[m.start() - 1 : m.start()] in ("?", "&")
                spans.append((start, end, _decoded(value, syntax, quote, in_query)))
            break
    return spans


def _decoded(value: str, syntax: str, quote: str, in_query: bool) -> str:
    """A context's value with its quoting undone as its syntax says (`json_decoded` ...)."""
    if syntax == "json" or (syntax == "yaml" and quote == '"'):
        return json_decoded(value)
    if in_query:  # ?token=X&...: a URL query's value
        return percent_decoded(value)
    if syntax == "shell":
        return shell_decoded(value, quote if quote in "\"'" else "")
    return value


# --- cutting a text short ------------------------------------------------------

# the characters of a token's run (base64, hex, URL-safe, a URL's user:password@)
_RUN_CHAR = re.compile(r"[A-Za-z0-9_\-+/=.~%:@$]")
_RUN_REST = re.compile(r"[A-Za-z0-9_\-+/=.~%:@$]*")
CUT_MASK = "[redacted]"
"""What stands for a secret or a token-shaped run a cut went through: the part kept would
be a secret's prefix, which no later search can recognise as one."""


def cut(text: str, limit: int, suffix: str = "...") -> str:
    """`text` cut to at most `limit` characters, `suffix` included, never inside a secret.

    The catalogue is searched in the whole text first (shapes, ``Bearer``,
    a tool's password, the value of a secret name), so a token whose shape
    only the whole text shows is not kept in part; and a cut inside a
    token-shaped run (letters, digits and ``_-+/=.~%:@$``, mixed or long)
    masks what is kept of that run: `CUT_MASK` stands for it. What is kept
    whole is redacted later like any text.
    """
    if len(text) <= limit:
        return text
    room = max(0, limit - len(suffix))
    found: list[Span] = list(scan_shapes(text))
    found.extend(scan_auth(text))
    found.extend((t.start, t.end, t.value) for t in tool_passwords(text))
    found.extend(context_spans(text, secret_by_name))
    keep, masked = _cut_point(text, room, found)
    if masked and keep + len(CUT_MASK) > room:
        keep = _cut_point(text, max(0, room - len(CUT_MASK)), found)[0]
    return text[:keep] + (CUT_MASK if masked else "") + suffix


def _cut_point(text: str, at: int, found: list[Span]) -> tuple[int, bool]:
    """Where to cut `text` at or before `at`, and whether what is cut there goes through a
    secret of `found` or a token-shaped run (whose kept part is then cut too)."""
    keep, masked = at, False
    for start, end, _secret in found:
        if start < keep < end:
            keep, masked = start, True
    if not masked and 0 < keep < len(text) and _RUN_CHAR.match(text, keep):
        start = keep
        while start > 0 and _RUN_CHAR.match(text, start - 1):
            start -= 1
        rest = _RUN_REST.match(text, keep)
        run = text[start : rest.end() if rest else keep]
        if start < keep and (len(run) >= 16 or (len(run) >= 6 and looks_random(run))):
            keep, masked = start, True
    return keep, masked
