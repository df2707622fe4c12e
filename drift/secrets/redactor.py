"""The Redactor: secrets out of drift's database, terminal and reports, as keyed digests.

What is a secret is `drift.secrets.shapes`'s catalogue (names, token
formats, contexts), plus the names ``[secrets] redact`` adds and minus those
``[secrets] allow`` lets through; how a redacted value reads is
`drift.secrets.markers`'s.

Every string a record stores is searched: values, every string of a
provenance (a command's ``run`` line too, whatever the fact), subjects and
keys (a file name, a flag word), collection errors, and the stat cache and
config scope beside them. A fact that is a secret (or whose whole value is a
secret found elsewhere) is stored as ``hmac-sha256:<32 hex>`` with
``secret=True``. A secret inside a larger text (argv, a script, command
output, provenance, a subject) is replaced by ``[redacted:<8 hex>]``, so a
masked file name stays one subject. Once a value of six or more characters is
known to be secret, it is masked wherever else it appears; a shorter or empty
one is masked only where it was found.

One idea, kept whole past 500 lines: masking a text and walking a record's
items share what the Redactor learns (the secrets seen anywhere in the
record, the digests, the flags a tool's password hid in).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drift.facts import CachedStat, CollectionError, Fact, FactBlock
from drift.secrets import markers
from drift.secrets.shapes import (
    Span,
    context_spans,
    has_secret_root,
    looks_like_token,
    may_hold_auth,
    may_hold_format,
    may_hold_shape,
    may_hold_tool,
    name_hint,
    scan_auth,
    scan_shapes,
    secret_by_name,
    tool_passwords,
    whole_secret,
)
from drift.secrets.structure import mask_nested, named_by_structure
from drift.subjects import DECLARED

if TYPE_CHECKING:
    from drift.config import SecretsSpec

# Shorter known values ("1", "on", "8000") would mask half of every text.
MIN_KNOWN_LENGTH = 6

# A stat cache value that is a SHA-256 holds nothing to mask (and a short known secret
# could turn up inside one by chance).
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


# Keys declared ``never`` (`drift.subjects`) are hashes, sizes, modes and ids:
# never secret, and masking a known secret inside a hex digest would corrupt
# it (a six-digit secret turns up in about one sha256 in 300k by chance).
# Skipping them is also what keeps a record of 40k file facts cheap.
_skips = DECLARED.skips
# What a key is judged by: the name in ``env:NAME``, ``flag:--NAME`` ...
# for the prefixes declared ``name``, else None (the value alone).
_name_in_key = DECLARED.name_in_key
# Keys whose values are JSON text (an endpoint's leaves): a secret one is digested decoded.
_json_text = DECLARED.json_text


Item = Fact | FactBlock | CollectionError


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
        self._name_hint = name_hint(self._redact)
        self._hex: dict[str, str] = {}
        # every spelling of a known secret (itself, its JSON escapes, as a script or a URL
        # wrote it) -> the secret, whose digest its marker is
        self._known: dict[str, str] = {}
        self._secrets: set[str] = set()
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
        """`is_secret_name` without its cache: the configured names first, then the catalogue's."""
        if not self._redact and not self._allow and not has_secret_root(name):
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
        return secret_by_name(name)

    def looks_like_secret_value(self, value: str) -> bool:
        """True if the whole value (trimmed) is in a known token format."""
        return looks_like_token(value)

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
        return markers.stored_digest(self._hexdigest(value))

    def marker(self, value: str) -> str:
        """What a secret inside a larger text becomes: ``[redacted:<8 hex>]``."""
        return markers.marker(self._hexdigest(value))

    def remember_secret(self, value: str, spelling: str | None = None) -> None:
        """Mask `value` from now on wherever it appears (if six characters or longer), and
        `spelling`, how a text wrote it (``s\\$cret`` in a script), with the same marker."""
        added = False
        if len(value) >= MIN_KNOWN_LENGTH and value not in self._secrets:
            self._secrets.add(value)
            # a secret's own text is itself, even if it spells another one's encoding
            self._known[value] = value
            added = True
            # argv and JSON output hold the value JSON-escaped (argv with \uXXXX escapes,
            # some encoders with \/)
            for ascii_only in (False, True):
                escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
                for spelled in (escaped, escaped.replace("/", "\\/")):
                    if spelled != value:
                        self._known.setdefault(spelled, value)
        if (
            spelling
            and len(spelling) >= MIN_KNOWN_LENGTH
            and spelling != value
            and spelling not in self._known
        ):
            self._known[spelling] = value
            added = True
        if added:
            self._literal_re = None

    def secret_of(self, key: str, value: str) -> str:
        """The secret a fact's whole value holds, as the tag is taken of (`whole_secret`)."""
        known = self._known.get(value)
        return known if known is not None else whole_secret(value, _json_text(key))

    # -- scanning ----------------------------------------------------------

    def _scan(self, text: str) -> Sequence[Span]:
        """Spans of `text` that are secret by format or context (not by known value)."""
        # Allocating nothing for the common no-hit case keeps the garbage
        # collector from walking 40k facts several times per record.
        tool = may_hold_tool(text)
        if not (
            tool or "://" in text or may_hold_format(text) or self._name_hint.search(text.upper())
        ):
            return ()
        spans = list(scan_shapes(text))
        if may_hold_auth(text):
            spans.extend(scan_auth(text))
        if tool:
            self._scan_tools(text, spans)
        if self._name_hint.search(text.upper()):
            spans.extend(context_spans(text, self.is_secret_name))
        return spans

    def _scan_tools(self, text: str, spans: list[Span]) -> None:
        """Add the tools' passwords in `text` to `spans`, and remember the flags that held them."""
        for found in tool_passwords(text):
            spans.append((found.start, found.end, found.value))
            if found.attached:
                # -pSECRET: the flag's own name holds the secret (flag:-pSECRET)
                self._secret_flag_names[found.flag + found.value] = found.flag + self.marker(
                    found.value
                )
            else:
                self._secret_flag_values.add((found.flag, found.value))

    def _literal_spans(self, text: str) -> Sequence[Span]:
        if not self._known:
            return ()
        if self._literal_re is None:
            # longest first, so a secret that contains another is masked whole
            alternatives = sorted(self._known, key=len, reverse=True)
            self._literal_re = re.compile("|".join(map(re.escape, alternatives)))
        if not self._literal_re.search(text):
            return ()
        known = self._known
        return [(m.start(), m.end(), known[m.group()]) for m in self._literal_re.finditer(text)]

    def _apply(self, text: str, *found: Sequence[Span], glob: bool = False) -> str:
        """`text` with each span (overlapping ones merged) replaced by its marker.

        In a `glob` the marker's brackets are escaped (``[[]redacted:...]``), so
        the pattern still matches the masked names.
        """
        if not any(found):
            return text
        # each span's secret, by place: the first group's (the context read) wins
        secrets: dict[tuple[int, int], str] = {}
        for group in found:
            for start, end, secret in group:
                secrets.setdefault((start, end), secret)
        merged: list[list[int]] = []
        for start, end in sorted(secrets):
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out: list[str] = []
        pos = 0
        for start, end in merged:
            covered = text[start:end]
            # overlapping secrets: the text they cover is one
            secret = secrets.get((start, end)) or self._known.get(covered, covered)
            out.append(text[pos:start])
            mark = self.marker(secret)
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
        return self._apply(name, scan_shapes(name), self._literal_spans(name))

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
        if shaped is None:
            shaped = any(map(may_hold_shape, _joined(names)))
        if not (shaped or any(map(self._holds_known, _joined(names)))):
            return names
        masked = [self.mask_name(name) for name in names]
        return names if all(m is n for m, n in zip(masked, names, strict=True)) else masked

    def mask_glob(self, pattern: str) -> str:
        """A file glob with secrets masked as in `mask_name`, matching the masked file names."""
        return self._apply(pattern, scan_shapes(pattern), self._literal_spans(pattern), glob=True)

    def without_secret_entries(self, stats: dict[str, CachedStat]) -> dict[str, CachedStat]:
        """`stats` (the stat cache, stored keyed by path) without the entries that hold a
        secret: in the path, or in the value remembered (a distribution's source URL).

        Such a file is read again at every record instead of its secret
        reaching the database; what it gives is redacted as a fact.
        """
        paths = list(stats)
        masked = self.mask_names(paths)
        kept = (
            stats
            if masked is paths
            else {p: stats[p] for p, m in zip(paths, masked, strict=True) if m == p}
        )
        holding = [
            path
            for path, entry in kept.items()
            if not _HEX_DIGEST.fullmatch(entry[4]) and self.mask_text(entry[4]) != entry[4]
        ]
        if not holding:
            return kept
        dropped = set(holding)
        return {p: e for p, e in kept.items() if p not in dropped}

    def _holds_known(self, text: str) -> bool:
        # `in` per secret is a memmem each, much faster over a long text than the alternation
        return any(secret in text for secret in self._known)

    def _learn(self, text: str, memo: _Memo, *, shapes_only: bool = False) -> None:
        """Remember every secret found in `text` (once per text), to mask it everywhere."""
        if shapes_only:
            if text in memo.names:
                return
            memo.names[text] = ""  # placeholder: masked in the second pass
            spans = scan_shapes(text)
        else:
            if text in memo.scans:
                return
            spans = memo.scans[text] = self._scan(text)
        for start, end, secret in spans:
            self.remember_secret(secret, text[start:end])

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
        messages are all searched. A FactBlock whose keys are all declared
        ``never`` (hashes, sizes, modes) stays a block, its subjects and provenances
        masked; any other block is redacted fact by fact.

        First pass: find secret facts (by name, by format) and learn every
        secret value seen anywhere; second pass: digest the secret facts (and
        those whose whole value is a secret learned elsewhere) and mask the
        rest. The values of facts with keys declared ``never`` and of facts
        already secret are left as they are.
        """
        flat: list[Item] = []
        for item in items:
            if isinstance(item, FactBlock) and not all(map(_skips, item.keys)):
                flat.extend(item)
            else:
                flat.append(item)
        memo = _Memo()
        named = self._by_structure(flat)
        secret_at: set[int] = set()
        for i, item in enumerate(flat):
            if isinstance(item, Fact):
                if self._learn_fact(item, memo, i in named):
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
                        lasting=item.lasting,
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

    def _by_structure(self, flat: list[Item]) -> set[int]:
        """The indexes of the JSON-text facts whose structure names them secret
        (`drift.secrets.structure`), a subject's leaves together; a leaf that is a JSON
        document in a string is replaced in `flat` by itself with its secrets masked."""
        by_subject: dict[str, dict[str, tuple[int, Any]]] = {}
        for i, item in enumerate(flat):
            if not isinstance(item, Fact) or item.secret or not _json_text(item.key):
                continue
            pointer = _name_in_key(item.key)
            try:
                leaf = json.loads(item.value)
            except (ValueError, RecursionError):
                continue
            if pointer is not None:
                by_subject.setdefault(item.subject, {})[pointer] = (i, leaf)
        named: set[int] = set()
        for entries in by_subject.values():
            found = {pointer: leaf for pointer, (_i, leaf) in entries.items()}
            named.update(entries[p][0] for p in named_by_structure(found, self.is_secret_name))
            for i, leaf in entries.values():
                if i in named or not isinstance(leaf, str):
                    continue
                inner = mask_nested(leaf, self.is_secret_name, self._nested_marker)
                if inner is not None:
                    fact = flat[i]
                    assert isinstance(fact, Fact)
                    flat[i] = Fact(fact.subject, fact.key, _json_string(inner), fact.provenance)
        return named

    def _nested_marker(self, secret: str) -> str:
        """The marker of a secret inside a JSON document in a JSON string, remembered with
        the spellings that nesting gives it (escaped once, and twice)."""
        once = json.dumps(secret, ensure_ascii=False)[1:-1]
        self.remember_secret(secret, json.dumps(once, ensure_ascii=False)[1:-1])
        return self.marker(secret)

    def _learn_fact(self, fact: Fact, memo: _Memo, named: bool = False) -> bool:
        """Learn the secrets of one fact; True if its value is a secret by name, format or
        (`named`) the structure around it."""
        self._learn(fact.subject, memo, shapes_only=True)
        self._learn(fact.key, memo)
        self._learn_provenance(fact.provenance, memo)
        key = fact.key
        if _skips(key) or fact.secret:
            return False
        value = fact.value
        name = _name_in_key(key)
        if named or (name is not None and self.is_secret_name(name)) or looks_like_token(value):
            secret = self.secret_of(key, value)
            # a value whose secret is short ("Bearer ab") is still masked whole elsewhere
            self.remember_secret(secret, value if len(secret) < MIN_KNOWN_LENGTH else None)
            return True
        self._learn(value, memo)
        return False

    def _learn_names(self, names: list[str], memo: _Memo) -> None:
        # one search of the joined names: 12k file names hold no token shape, as a rule
        shaped = memo.shaped[id(names)] = any(map(may_hold_shape, _joined(names)))
        if shaped:
            for name in names:
                self._learn(name, memo, shapes_only=True)

    def _redact_fact(self, fact: Fact, secret: bool, memo: _Memo) -> Fact:
        subject = self._mask_name_memo(fact.subject, memo)
        key = self._mask_key(fact.key, memo)
        provenance = self._mask_provenance(fact.provenance, memo)
        value = fact.value
        if _skips(fact.key) or fact.secret:
            masked = value
        elif secret or value in self._known or self._secret_flag_value(fact.key, value):
            if isinstance(fact.provenance.get("possible"), list):
                provenance = self._digest_possible(fact.provenance, provenance)
            secret_value = self.secret_of(fact.key, value)
            provenance = self._own_line_masked(
                fact.provenance, provenance, value, secret_value, memo
            )
            return Fact(subject, key, self.digest(secret_value), provenance, secret=True)
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

    def _own_line_masked(
        self,
        raw: dict[str, Any],
        masked: dict[str, Any],
        value: str,
        secret_value: str,
        memo: _Memo,
    ) -> dict[str, Any]:
        """A secret's own line as written (``DB_PASSWORD=ab cd``) with its whole value masked.

        Elsewhere a value too short to look for (``ab cd``) is found by its context,
        which ends at a blank; on the line that assigned it, the value is known whole.
        """
        text = raw.get("text")
        if not isinstance(text, str) or not value:
            return masked
        at = text.find(value, text.find("=") + 1)
        if at < 0:
            return masked
        before, after = text[:at], text[at + len(value) :]
        whole = self._mask_memo(before, memo) + self.marker(secret_value)
        return {**masked, "text": whole + self._mask_memo(after, memo)}

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


def _json_string(text: str) -> str:
    """`text` as a JSON string, unicode as it is (a lone surrogate escaped)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return json.dumps(text, ensure_ascii=False)


def _joined(names: list[str], size: int = 4096) -> Iterator[str]:
    """`names` joined by newlines, `size` names at a time.

    A secret lies within one name, so a search of the parts finds what a
    search of one join would, without a 14 MB string for 150k file names.
    """
    for start in range(0, len(names), size):
        yield "\n".join(names[start : start + size])


def _distinct(provenances: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Each provenance dict once, by identity (a block's files share a few)."""
    return dict(zip(map(id, provenances), provenances, strict=True)).values()


def load_or_create_key(path: Path) -> bytes:
    """The per-install redaction key: 32 random bytes in a 0600 file, created on first use.

    Read as `drift.keyfile.load_key` reads it (never through a symlink, never
    from a FIFO or device, a regular file of 32 bytes owned by whoever runs
    drift); `load_key` also says whether the file's mode exposes it.
    """
    from drift.keyfile import load_key

    return load_key(path).key
