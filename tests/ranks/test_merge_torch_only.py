"""``record --nproc`` merges its rank files where only torch is installed: no msgspec, no pyarrow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MERGE = textwrap.dedent(
    """
    import json
    import sys
    sys.modules["msgspec"] = None  # as if not installed: importing it raises ImportError
    sys.modules["pyarrow"] = None
    from pathlib import Path
    from collector.ranks.merge import merge_files
    from collector.synthetic.ranks import rank_job, write_rank_files
    from collector.traceformat.write import write_trace

    folder = Path(sys.argv[1])
    paths = write_rank_files(rank_job(2, 400, steps=4, slow_rank=1, delay_ns=2_000_000), folder)
    merged = merge_files(paths)
    write_trace(merged, str(folder / "run.json.gz"))
    found = {"ranks": merged.ranks, "intervals": len(merged.intervals), "msgspec": bool(sys.modules["msgspec"])}
    print(json.dumps(found))
    """
)


def test_rank_files_merge_with_the_standard_library_reader(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", MERGE, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["ranks"] == [0, 1] and out["intervals"] > 800 and not out["msgspec"]
    assert (tmp_path / "run.json.gz").stat().st_size > 0
