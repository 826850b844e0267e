"""Rank files in a .zip: the traces of one job's ranks handed over as one archive.

Members ending in ``.json`` or ``.json.gz`` are the rank files (folders inside the archive are fine;
macOS ``__MACOSX/`` entries and hidden files are skipped). A member is read as a stream and never
written under its own name, so a crafted path inside the archive cannot reach outside the folder given.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path, PurePosixPath

from collector.traceformat.spec import TraceFileError

RANK_SUFFIXES = (".json.gz", ".json")


class RankZipError(TraceFileError):
    """An archive that is not a zip or holds no rank files (one line; CLI exit 2, HTTP 400)."""


def is_zip_name(name: str) -> bool:
    return name.lower().endswith(".zip")


def rank_members(zf: zipfile.ZipFile, where: str) -> list[zipfile.ZipInfo]:
    """The trace members of ``zf`` in name order; raises RankZipError when there are none."""
    members = []
    for info in zf.infolist():
        parts = PurePosixPath(info.filename).parts
        if info.is_dir() or not parts or parts[0] == "__MACOSX" or parts[-1].startswith("."):
            continue
        if info.filename.lower().endswith(RANK_SUFFIXES):
            members.append(info)
    if not members:
        raise RankZipError(f"{where}: the zip holds no .json or .json.gz rank files")
    return sorted(members, key=lambda i: i.filename)


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
