"""Rank files in a zip: the traces of one job's ranks handed over as one archive.

The archive and its members are recognised by their first bytes, never their names
(collector.importers.registry): a member is a rank file when it is a trace (or gzip or JSON that is no
known trace, so that a damaged rank file is reported rather than left out). Folders inside the archive are
fine; macOS ``__MACOSX/`` entries and hidden files are skipped. A member is read as a stream and never
written under its own name, so a crafted path inside the archive cannot reach outside the folder given.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path, PurePosixPath

from collector.importers.registry import RANK_ZIP, format_of, is_trace_like
from collector.traceformat.head import sniff
from collector.traceformat.spec import TraceFileError


class RankZipError(TraceFileError):
    """An archive that is not a zip or holds no rank files (one line; CLI exit 2, HTTP 400)."""


def is_rank_zip(path: str | os.PathLike[str]) -> bool:
    """The file at ``path`` is a zip (by its magic bytes), to be read as the rank files it holds."""
    return format_of(path) is RANK_ZIP


def rank_members(zf: zipfile.ZipFile, where: str) -> list[zipfile.ZipInfo]:
    """The trace members of ``zf`` in name order; raises RankZipError when there are none."""
    members = []
    for info in zf.infolist():
        parts = PurePosixPath(info.filename).parts
        if info.is_dir() or not parts or parts[0] == "__MACOSX" or parts[-1].startswith("."):
            continue
        if _is_rank_file(zf, info):
            members.append(info)
    if not members:
        raise RankZipError(f"{where}: the zip holds no rank files (traces Streamscope reads)")
    return sorted(members, key=lambda i: i.filename)


def _is_rank_file(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    try:
        with zf.open(info) as fh:
            return is_trace_like(sniff(fh))
    except (TraceFileError, zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError):
        return True  # it does not read: reported when it is read in full


def open_zip(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    """``path`` opened as a zip; raises RankZipError when it is not one."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise RankZipError(f"{Path(path).name}: not a readable zip ({exc})") from None


def extract_ranks(path: str | os.PathLike[str], folder: Path, limit_bytes: int = 1 << 62) -> list[Path]:
    """Write the rank files of the zip at ``path`` into ``folder`` (``<n>/<base name>``); returns their paths.
    Raises RankZipError for a member larger than ``limit_bytes`` once inflated (counted, not trusted)."""
    out: list[Path] = []
    with open_zip(path) as zf:
        for n, info in enumerate(rank_members(zf, Path(path).name)):
            if info.file_size > limit_bytes:
                raise RankZipError(f"{info.filename}: {info.file_size:,} bytes inflated, more than {limit_bytes:,}")
            dst = folder / f"{n:05d}" / PurePosixPath(info.filename).name
            dst.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(dst, "wb") as fh:
                copied = 0
                while chunk := src.read(1 << 20):
                    copied += len(chunk)
                    if copied > limit_bytes:
                        raise RankZipError(f"{info.filename}: inflates past {limit_bytes:,} bytes")
                    fh.write(chunk)
            out.append(dst)
    return out
