"""Runs every benchmark script in bench/ (bench_*.py) one after the other; `make bench` calls this.

Extra arguments are passed to each script (e.g. ``--quick`` for a smoke run). Exits non-zero if any script fails.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    """Runs each bench/bench_*.py with argv; returns the number of scripts that failed."""
    here = Path(__file__).resolve().parent
    scripts = sorted(here.glob("bench_*.py"))
    failed = []
    for script in scripts:
        print(f"##### {script.name} {' '.join(argv)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-u", str(script), *argv])
        print(f"##### {script.name}: exit {rc} after {time.perf_counter() - t0:.1f} s\n", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return len(failed)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
