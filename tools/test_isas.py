"""Runs the ISA-dependent tests on every kernel path this build can select and counts the passes per path.

Usage (``make test-isas`` does this against build-isas, where the AVX-512, AVX-512 VNNI and AVX-VNNI kernels are
emulated with SIMDe on CPUs that lack them): ``python tools/test_isas.py [pytest arguments]``.

A test belongs to a path when one of its parameters names it (the per-ISA fixtures' ``isa``, the GEMM ``kernel``);
tests that switch paths themselves (a loop over ``set_isa`` or ``ORTQUANT_ISA``) run every path and are counted
once as "every path". Tests of the given files that touch no path at all are deselected: the normal suite runs
them. The last lines are ``<path>: N passed`` for every path; the run fails if a path has no passing test.
"""

from __future__ import annotations

import inspect
import platform
import sys
from collections import Counter
from pathlib import Path

import pytest

from ortquant import _C

# Source words of a test function that switches kernel paths itself.
_SWITCHES = ("set_isa", "ORTQUANT_ISA", "supported_isas", "ISAS", "KERNELS", "gemm_kernels")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


class _PerPath:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.path_of: dict[str, set[str]] = {}
        self.passed: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()

    def _paths(self, item: pytest.Item) -> set[str] | None:
        spec = getattr(item, "callspec", None)
        named = {v for v in (spec.params.values() if spec else ()) if isinstance(v, str) and v in self.paths}
        if named:
            return named
        fn = getattr(item, "function", None)
        try:
            src = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            src = ""
        return {"every path"} if any(w in src for w in _SWITCHES) else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep, drop = [], []
        for item in items:
            paths = self._paths(item)
            if paths is None:
                drop.append(item)
            else:
                self.path_of[item.nodeid] = paths
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        paths = self.path_of.get(report.nodeid, set())
        if report.when == "call" and report.passed:
            self.passed.update(paths)
        elif report.failed:
            self.failed.update(paths)


def main(argv: list[str]) -> int:
    paths = list(_C.available_isas())
    emulated = set(_C.emulated_isas())
    native = [p for p in paths if p not in emulated]
    print(f"test-isas: ortquant from {Path(_C.__file__).parent}", flush=True)
    print(f"test-isas: native on this CPU ({_cpu_name()}): {', '.join(native)}", flush=True)
    print(f"test-isas: emulated with SIMDe: {', '.join(sorted(emulated, key=paths.index)) or 'none'}", flush=True)
    plugin = _PerPath(paths)
    rc = pytest.main(["-q", "-p", "no:cacheprovider", *argv], plugins=[plugin])
    if plugin.passed["every path"]:
        print(f"every path (tests that switch paths themselves): {plugin.passed['every path']} passed")
    empty = [p for p in paths if plugin.passed[p] == 0]
    for p in paths:
        failed = f", {plugin.failed[p]} failed" if plugin.failed[p] else ""
        print(f"{p}: {plugin.passed[p]} passed{failed}")
    if empty:
        print(f"test-isas: no test passed on {', '.join(empty)}", file=sys.stderr)
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
