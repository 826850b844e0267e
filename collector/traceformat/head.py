"""A file's first bytes, as format recognition reads them (collector.importers.registry).

A :class:`Head` holds the stored bytes (a zip's magic), whether they are gzip, the first :data:`HEAD_BYTES`
of the content (inflated when gzip) and the top-level keys of a JSON object as far as that text shows
them, each with the first character of its value. Only the head is read: never the whole file.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Protocol

from collector.traceformat.spec import GZIP_MAGIC, TraceFileError, corrupt_gzip

HEAD_BYTES = 256 * 1024
"""How much of a file (of its content, for a gzip) recognition reads."""
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first member, or an empty zip's end record

_BLANK = re.compile(r"[ \t\r\n]*")


@dataclass(frozen=True)
class Head:
    """The first bytes of one file; see the module docstring."""

    raw: bytes
    text: bytes
    keys: dict[str, str] = field(default_factory=dict)
    """top-level key of a JSON object -> the first character of its value (``{`` for an object), in file
    order, up to the first value that runs past the head"""

    @property
    def gzip(self) -> bool:
        return self.raw.startswith(GZIP_MAGIC)

    @property
    def zip(self) -> bool:
        return self.raw.startswith(ZIP_MAGICS)

    @property
    def json_array(self) -> bool:
        """The content is a JSON array (Chrome's array form of a trace)."""
        return self.text.lstrip().startswith(b"[")


class Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


def sniff(fh: Readable) -> Head:
    """The head of the file open at ``fh`` (read from its current position). Raises TraceFileError when a
    gzip's first bytes do not inflate."""
    raw = fh.read(HEAD_BYTES)
    text = raw
    if raw.startswith(GZIP_MAGIC):
        try:
            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
        except zlib.error as exc:
            raise corrupt_gzip(exc) from None
    return Head(raw, text, top_keys(text.decode("utf-8", errors="replace")))


def read_head(path: str | os.PathLike[str]) -> Head:
    """The head of the file at ``path``; raises TraceFileError (one line) when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return sniff(fh)
    except OSError as exc:
        raise TraceFileError(f"cannot read the file ({exc.strerror or exc})") from None


def top_keys(text: str) -> dict[str, str]:
    """The keys of the JSON object ``text`` starts with, each with the first character of its value; empty
    when it is no object. Stops at the first value that does not end within ``text`` (or is not JSON)."""
    keys: dict[str, str] = {}
    decoder = json.JSONDecoder()
    at = _skip_blank(text, 0)
    if not text.startswith("{", at):
        return keys
    at += 1
    while True:
        at = _skip_blank(text, at)
        if not text.startswith('"', at):
            return keys
        try:
            key, at = decoder.raw_decode(text, at)
        except ValueError:
            return keys
        at = _skip_blank(text, at)
        if not text.startswith(":", at):
            return keys
        at = _skip_blank(text, at + 1)
        keys[key] = text[at : at + 1]
        try:
            _, at = decoder.raw_decode(text, at)  # the value, skipped (stops at one cut by the head's end)
        except ValueError:
            return keys
        at = _skip_blank(text, at)
        if not text.startswith(",", at):
            return keys
        at += 1


def _skip_blank(text: str, at: int) -> int:
    m = _BLANK.match(text, at)
    return m.end() if m else at
