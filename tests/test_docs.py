"""The documentation tells the truth: every code snippet of README.md and docs/*.md runs, and user-facing text speaks
of the code, never of internal issue numbers.

Snippets: every fenced block tagged ``python`` runs in a fresh interpreter, every block tagged ``sh`` in bash, each
in an empty working directory with ``models/`` linked into it, against this checkout's developer build (or the
installed package when ``ORTQUANT_TEST_INSTALLED=1``). A snippet fails the test when it exits non-zero. What a
snippet may not do here, and why, is said in one of two places:

- in the document, by ``<!-- snippet: no-run (reason) -->`` on the line right above the block (for snippets that
  are not meant to run anywhere: a Triton backend's model.py, an S3 bucket, ``make demo``);
- in ``SUBSTITUTIONS`` and ``OPTIONAL_MODULES`` below (a model file named in the text, a variable the text leaves
  to the reader, a package the snippet needs that is not installed).

Untagged blocks (directory listings, config files, formulas) and ``c`` blocks are not code to run; the C host of
examples/ is compiled and run by tests/test_examples.py.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CNN = ROOT / "models" / "cnn_w4a4.onnx"
# A model as most QONNX exports are (batch 1 fixed, a Reshape [1, -1]); the bundled CNN when the corpus is absent.
_TFC = ROOT.parent / "shared" / "conformance" / "realworld" / "zoo_tfc_1w1a_dom.onnx"
FIXED_BATCH = _TFC if _TFC.is_file() else CNN

RUN_LANGS = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
NO_RUN = re.compile(r"<!--\s*snippet:\s*no-run\s*\((?P<reason>[^)]+)\)\s*-->")

# (document, text the snippet contains) -> replacements in the snippet, code run before it, why.
SUBSTITUTIONS: list[tuple[str, str, dict[str, str], str, str]] = [
    (
        "README.md",
        'sess = ortquant.InferenceSession("model.onnx")',
        {'"model.onnx"': repr(str(CNN)), '{"input": x}': '{"global_in": x}'},
        "import numpy as np\nx = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)\n",
        "the text's model.onnx and its input x: the bundled CNN and two random images",
    ),
    (
        "README.md",
        'sess = ort.InferenceSession("model.onnx", so)',
        {'"model.onnx"': repr(str(CNN))},
        "",
        "the text's model.onnx: the bundled CNN (it needs no rewrite, so a plain session loads it)",
    ),
    (
        "README.md",
        'set_batch_size(onnx.load("model.onnx"), None)',
        {'"model.onnx"': repr(str(FIXED_BATCH))},
        "",
        "the text's model.onnx: a published QONNX model with a fixed batch of 1 (FINN's TFC), or the bundled CNN",
    ),
]

# Packages a snippet may need that a development environment need not have: the snippet is skipped without them.
OPTIONAL_MODULES = {
    "ray": "Ray (pip install 'ray[data]'; make test-ray runs the serving tests in a venv with it)",
    "tritonclient": "the Triton client",
    "pytriton": "PyTriton",
}


@dataclass
class Snippet:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str  # "python" or "sh"
    code: str
    no_run: str | None  # the reason given in the document

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc.name}:{self.line}"


def extract(doc: Path) -> list[Snippet]:
    """The runnable-language fenced blocks of a Markdown file, with the no-run marker right above each."""
    lines = doc.read_text().splitlines()
    out: list[Snippet] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([\w+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2).lower()
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        if lang in RUN_LANGS:
            above = lines[i - 1] if i > 0 else ""
            marker = NO_RUN.search(above)
            if "<!--" in above and "snippet" in above and not marker:
                raise AssertionError(
                    f"{doc}:{i}: malformed snippet marker {above!r} (use <!-- snippet: no-run (why) -->)"
                )
            body = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1 : end])
            out.append(Snippet(doc, i + 1, RUN_LANGS[lang], body + "\n", marker.group("reason") if marker else None))
        i = end + 1
    return out


def _prepare(snippet: Snippet) -> tuple[str, str | None]:
    """The code to run after the substitutions, or a reason to skip it."""
    code = snippet.code
    prelude = ""
    for doc, contains, replace, pre, _why in SUBSTITUTIONS:
        if snippet.doc.name == doc and contains in code:
            for old, new in replace.items():
                assert old in code, f"{snippet.id}: substitution {old!r} no longer applies"
                code = code.replace(old, new)
            prelude += pre
    if snippet.lang == "python":
        assert "model.onnx" not in code, f"{snippet.id} names model.onnx: add a substitution to SUBSTITUTIONS"
        for node in ast.walk(ast.parse(code)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in OPTIONAL_MODULES and importlib.util.find_spec(top) is None:
                    return code, f"needs {OPTIONAL_MODULES[top]}"
    return prelude + code, None


def run_snippet(snippet: Snippet, workdir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run one snippet in ``workdir`` (``models/`` linked in); the `ortquant` command is this interpreter's."""
    code, skip = _prepare(snippet)
    if skip:
        pytest.skip(skip)
    models = workdir / "models"
    if not models.exists():
        models.symlink_to(ROOT / "models")
    env = dict(os.environ)
    if snippet.lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        bindir = workdir / ".bin"
        bindir.mkdir(exist_ok=True)
        wrapper = bindir / "ortquant"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ortquant "$@"\n')
        wrapper.chmod(0o755)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        cmd = ["bash", "-euo", "pipefail", "-c", code]
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, check=False)


SNIPPETS = [s for doc in DOCS for s in extract(doc)]


def test_the_docs_have_snippets_to_run():
    assert len([s for s in SNIPPETS if s.no_run is None]) >= 4, [s.id for s in SNIPPETS]
    for _doc, contains, _replace, _pre, why in SUBSTITUTIONS:  # every entry of the table still finds its snippet
        assert why and any(contains in s.code for s in SNIPPETS), f"no snippet contains {contains!r}"


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_snippet_runs(snippet: Snippet, tmp_path):
    if snippet.no_run is not None:
        assert snippet.no_run.strip(), f"{snippet.id}: a no-run marker needs a reason"
        pytest.skip(f"marked no-run in the document: {snippet.no_run}")
    r = run_snippet(snippet, tmp_path)
    assert r.returncode == 0, (
        f"{snippet.id} ({snippet.lang}) failed with exit status {r.returncode}\n--- snippet\n{snippet.code}"
        f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    )


def test_runner_fails_on_a_failing_snippet(tmp_path):
    """The runner itself: a snippet that raises or exits non-zero fails; a marked one is not run."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n\n```python\nimport ortquant\nortquant.no_such_function()\n```\n\n"
        "```sh\nortquant check models/does_not_exist.onnx\n```\n\n"
        "<!-- snippet: no-run (an example of a marked block) -->\n```python\nraise SystemExit(3)\n```\n\n"
        "```python\nimport ortquant\nprint(ortquant.__version__)\n```\n\n```\nnot code\n```\n"
    )
    snippets = extract(doc)
    assert [(s.lang, s.no_run) for s in snippets] == [
        ("python", None), ("sh", None), ("python", "an example of a marked block"), ("python", None),
    ]  # fmt: skip
    failing, shell, _marked, fine = snippets
    r = run_snippet(failing, tmp_path)
    assert r.returncode != 0 and "AttributeError" in r.stderr and "no_such_function" in r.stderr
    assert run_snippet(shell, tmp_path).returncode != 0
    r = run_snippet(fine, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == __import__("ortquant").__version__
    bad_marker = tmp_path / "bad.md"
    bad_marker.write_text("<!-- snippet: skip -->\n```python\npass\n```\n")
    with pytest.raises(AssertionError, match="malformed snippet marker"):
        extract(bad_marker)


# ---- no internal issue numbers in what users read ---------------------------------------------------------------

ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def _user_facing_files() -> list[Path]:
    files = [*DOCS, ROOT / "CHANGELOG.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    files += sorted((ROOT / "python" / "ortquant").rglob("*.py"))
    files += sorted(p for p in (ROOT / "csrc").rglob("*") if p.suffix in {".h", ".cc", ".cpp", ".ver"})
    files += sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file())
    return [f for f in files if f.is_file()]


def test_no_internal_issue_numbers_in_user_facing_text():
    hits = []
    for f in _user_facing_files():
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not hits, "internal issue numbers in user-facing text (say what the code does instead):\n" + "\n".join(hits)
