"""``python3 -m collector record|demos`` (see collector.cli.main)."""

from __future__ import annotations

import sys

from collector.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
