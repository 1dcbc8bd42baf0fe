"""ortquant as a package (issue 12): what it ships, what importing it changes, what it depends on.

Three groups:
- the source tree: the vendored onnxruntime header (exactly one file, its license and recorded version), a build
  that needs no apt or download, no committed profiler dumps, pyproject's dependencies and the documented
  onnxruntime range;
- import behaviour, each in a fresh interpreter: `import ortquant` changes no global state, ortquant next to
  onnx.reference, qonnx's transformations and onnxruntime-extensions in every import order, lazy
  ``ortquant.kernels``, and a clear message without onnxruntime;
- the installed wheel (only when ORTQUANT_TEST_INSTALLED=1, as `make wheel-test` / `make ort-matrix` run the
  tests): the package comes from site-packages, its libraries need nothing newer than glibc 2.28 and no
  libstdc++, and export only their entry points; a venv without onnxruntime gets none pulled in.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import ortquant

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = os.environ.get("ORTQUANT_TEST_INSTALLED") == "1"
THIRD = ROOT / "third_party" / "onnxruntime"
HEADER = THIRD / "include" / "onnxruntime_c_api.h"
MATRIX = [v for v in (ROOT / "tools" / "ort_matrix.txt").read_text().split() if re.fullmatch(r"\d+\.\d+\.\d+", v)]
LOWEST = MATRIX[0]
ORT_VARIANTS = re.compile(r"^onnxruntime(-gpu|-openvino|-directml|-training|-silicon)?\b", re.IGNORECASE)


def _py(code: str, *, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter of this environment (same sys.path as this test process)."""
    full_env = dict(os.environ if env is None else env)
    if not INSTALLED:
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), full_env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
        check=False,
    )


def _ok(code: str, **kw: object) -> str:
    r = _py(code, **kw)  # type: ignore[arg-type]
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


# ---- the source tree ---------------------------------------------------------------------------------------


def test_vendored_header_is_exactly_the_c_api_with_license_and_version():
    assert sorted(p.name for p in (THIRD / "include").iterdir()) == ["onnxruntime_c_api.h"]
    assert "MIT License" in (THIRD / "LICENSE").read_text()
    text = HEADER.read_text()
    api = re.search(r"^#define ORT_API_VERSION (\d+)", text, re.M)
    assert api, "no ORT_API_VERSION in the vendored header"
    version = (THIRD / "VERSION").read_text()
    assert f"ORT_API_VERSION {api.group(1)}" in version
    assert hashlib.sha256(HEADER.read_bytes()).hexdigest() in version  # VERSION describes this very file
    # It stands alone: C standard headers only (specstrings.h is inside #ifdef _WIN32).
    includes = set(re.findall(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", text, re.M))
    assert includes <= {"stdbool.h", "stdint.h", "stdlib.h", "string.h", "specstrings.h"}, includes
    assert (ROOT / "tools" / "refresh_ort_headers.sh").is_file()


def test_build_needs_no_apt_no_download_no_system_headers():
    cmake = [ROOT / "CMakeLists.txt", *sorted((ROOT / "cmake").glob("*.cmake"))]
    text = "\n".join(p.read_text() for p in cmake)
    for banned in ("apt-get", "dpkg", "file(DOWNLOAD", "FetchContent", "ExternalProject", "/usr/include"):
        assert banned not in text, f"{banned} in the CMake files: the sdist must build offline on any host"
    assert "third_party/onnxruntime/include" in (ROOT / "cmake" / "OrtHeaders.cmake").read_text()
    # The sdist carries the header (scikit-build-core includes tracked files; this keeps it explicit).
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "third_party/onnxruntime/**" in pyproject["tool"]["scikit-build"]["sdist"]["include"]


def test_no_profiler_dumps_in_the_tree():
    if (ROOT / ".git").exists() and shutil.which("git"):
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert not [f for f in files.splitlines() if re.search(r"onnxruntime_profile_.*\.json$", f)]
    assert "onnxruntime_profile_*.json" in (ROOT / ".gitignore").read_text()


def test_onnxruntime_is_not_a_dependency_but_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if ORT_VARIANTS.match(d)], project["dependencies"]
    assert project["optional-dependencies"]["cpu"] == [f"onnxruntime>={LOWEST}"]
    # register() warns below the same release
    from ortquant._library import OLDEST_ONNXRUNTIME

    assert OLDEST_ONNXRUNTIME == LOWEST


def test_readme_states_the_tested_onnxruntime_range():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Supported onnxruntime versions", 1)[1].split("\n## ", 1)[0]
    for v in MATRIX:
        assert v in section, f"README's onnxruntime section does not name the tested {v}"
    api = re.search(r"^#define ORT_API_VERSION (\d+)", HEADER.read_text(), re.M).group(1)  # type: ignore[union-attr]
    assert f"API version {api}" in section
    assert "pip install '.[cpu]'" in readme  # the extra, installed from a clone


def test_py_typed_is_shipped():
    assert (Path(ortquant.__file__).parent / "py.typed").is_file()


# ---- importing ---------------------------------------------------------------------------------------------

SCHEMAS = "import onnx.defs\nS = {(s.domain, s.name) for s in onnx.defs.get_all_schemas_with_history()}\n"


def test_import_changes_no_onnx_schemas():
    out = _ok(
        SCHEMAS
        + textwrap.dedent(
            """
        before = S
        import ortquant
        after = {(s.domain, s.name) for s in onnx.defs.get_all_schemas_with_history()}
        assert after == before, sorted(after - before)[:5]
        ortquant.register_schemas()
        ortquant.register_schemas()
        registered = {(s.domain, s.name) for s in onnx.defs.get_all_schemas_with_history()} - before
        assert ("qonnx.custom_op.general", "Quant") in registered and ("thinker", "iqAdd") in registered
        print(len(registered))
        """
        )
    )
    assert int(out) > 50


# A standard model onnx.reference must still evaluate (Relu also exists as thinker::Relu once registered).
REFERENCE_RUN = """
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
(y,) = ReferenceEvaluator(m).run(None, {"x": np.array([-1, 0, 2], np.float32)})
assert y.tolist() == [-1.0, 0.0, 4.0], y
"""

QONNX_RUN = """
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_shapes import InferShapes
from qonnx.core.onnx_exec import execute_onnx
inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("s", 0.5), ("z", 0), ("b", 4))]
g = helper.make_graph([helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain="qonnx.custom_op.general",
                                        signed=1, narrow=0, rounding_mode="ROUND")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("qonnx.custom_op.general", 1)])
m.ir_version = 10
w = ModelWrapper(m).transform(InferShapes())
y = execute_onnx(w, {"x": np.array([-9, -0.3, 0.8, 9], np.float32)})["y"]
assert y.tolist() == [-4.0, -0.5, 1.0, 3.5], y
"""

OTHERS = {
    "onnx.reference": ("onnx.reference", REFERENCE_RUN),
    "qonnx": ("qonnx.transformation.infer_shapes", QONNX_RUN),
    "onnxruntime_extensions": ("onnxruntime_extensions", REFERENCE_RUN),
}


@pytest.mark.parametrize("register", ["import-only", "register_schemas", "prepare_model"])
@pytest.mark.parametrize("order", ["other-first", "ortquant-first"])
@pytest.mark.parametrize("other", list(OTHERS))
def test_ortquant_next_to_other_onnx_libraries(other: str, order: str, register: str):
    module, run = OTHERS[other]
    pytest.importorskip(module.split(".")[0])
    use = {
        "import-only": "",
        # prepare_model registers the schemas itself (its shape inference needs them)
        "register_schemas": "ortquant.register_schemas()",
        # prepare_model registers them itself when its int8-Relu rewrite needs shape inference
        "prepare_model": textwrap.dedent(
            """
            from onnx import TensorProto, helper
            nodes = [helper.make_node("iqAdd", ["a", "b"], ["c"], domain="thinker", scale_x=1.0, scale_y=1.0,
                                      scale_o=1.0),
                     helper.make_node("Relu", ["c"], ["d"])]
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(v, TensorProto.INT8, [2]) for v in "ab"],
                                  [helper.make_tensor_value_info("d", TensorProto.INT8, [2])])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("thinker", 1)])
            p = ortquant.prepare_model(m)
            assert [n.domain for n in p.graph.node] == ["thinker", "thinker"], p.graph.node
            import onnx.defs
            assert onnx.defs.has("iqAdd", "thinker")
            """
        ),
    }[register]
    ours = f"import ortquant\n{use}\n"
    theirs = f"import {module}\n"
    code = theirs + ours if order == "other-first" else ours + theirs
    _ok(code + run)


def test_kernels_reachable_after_import_ortquant():
    """README: ``ortquant.kernels.active_isa()`` after a plain ``import ortquant``."""
    out = _ok("import ortquant\nprint(ortquant.kernels.active_isa())")
    assert out.strip() in {"scalar", "avx2", "avx512", "avx512vnni"}, out
    # ... without loading the pybind11 module for users who never touch it.
    _ok("import sys, ortquant\nassert 'ortquant._C' not in sys.modules and 'ortquant.kernels' not in sys.modules")


BLOCK_ORT = "import sys\nfor m in ('onnxruntime', 'onnxruntime.capi'):\n    sys.modules[m] = None\n"


def test_without_onnxruntime_import_says_what_to_install():
    r = _py(BLOCK_ORT + "import ortquant\nprint(ortquant.library_path())")
    assert r.returncode == 0, r.stderr
    assert "pip install onnxruntime (CPU)" in r.stderr and "onnxruntime-gpu" in r.stderr, r.stderr
    assert r.stdout.strip().endswith("libortquant.so")  # C/C++ hosts and Triton still get the library path
    r = _py(
        BLOCK_ORT + "import warnings; warnings.simplefilter('ignore')\nimport ortquant\nortquant.InferenceSession(b'')"
    )
    assert r.returncode != 0
    assert "ImportError: ortquant needs an onnxruntime package" in r.stderr, r.stderr
    assert "pip install onnxruntime (CPU)" in r.stderr


def test_with_onnxruntime_import_is_silent():
    r = _py("import warnings; warnings.simplefilter('error')\nimport ortquant")
    assert r.returncode == 0 and r.stderr == "", r.stderr


# ---- the installed wheel -----------------------------------------------------------------------------------

installed_only = pytest.mark.skipif(not INSTALLED, reason="checks the installed wheel (make wheel-test)")


def _native_files() -> list[Path]:
    pkg = Path(ortquant.__file__).resolve().parent
    files = [pkg / "libortquant.so", *pkg.glob("_C*.so")]
    assert all(f.is_file() for f in files) and len(files) == 2, files
    return files


@installed_only
def test_installed_package_is_not_the_source_tree():
    assert ROOT / "python" not in Path(ortquant.__file__).resolve().parents
    assert "site-packages" in ortquant.__file__


@installed_only
def test_installed_libraries_need_at_most_glibc_2_28_and_no_libstdcxx():
    readelf = shutil.which("readelf") or pytest.skip("readelf (binutils) is not installed")
    for f in _native_files():
        text = subprocess.run([readelf, "-dW", "--dyn-syms", "-V", str(f)], capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", text)
        assert needed and not [n for n in needed if "stdc++" in n or "c++" in n or "gcc_s" in n], (f.name, needed)
        versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", text)}
        assert versions and max(versions) <= (2, 28), (f.name, sorted(versions)[-3:])
        assert not re.search(r"GLIBCXX_|CXXABI_", text), f.name


@installed_only
def test_installed_python_module_exports_only_its_init():
    nm = shutil.which("nm") or pytest.skip("nm (binutils) is not installed")
    (c_module,) = [f for f in _native_files() if f.name.startswith("_C")]
    out = subprocess.run([nm, "-D", "--defined-only", str(c_module)], capture_output=True, text=True, check=True)
    symbols = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    assert symbols == {"PyInit__C"}, sorted(symbols)[:20]


@installed_only
def test_installed_metadata_has_no_onnxruntime_requirement():
    from importlib.metadata import distribution

    dist = distribution("ortquant")
    reqs = dist.requires or []
    hard = [r for r in reqs if "extra ==" not in r]
    assert not [r for r in hard if ORT_VARIANTS.match(r)], hard
    assert f'onnxruntime>={LOWEST}; extra == "cpu"' in [r.replace("'", '"') for r in reqs], reqs
    assert any(str(f).endswith("ortquant/py.typed") for f in dist.files or [])


@installed_only
def test_wheel_in_a_venv_without_onnxruntime(tmp_path):
    """pip pulls no onnxruntime in; `import ortquant` there says what to install and still finds the library."""
    wheel = os.environ.get("ORTQUANT_WHEEL") or pytest.skip("ORTQUANT_WHEEL (the wheel under test) is not set")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", wheel], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([py, "-m", "pip", "list"], capture_output=True, text=True, check=True, timeout=300)
    assert not re.search(r"^onnxruntime", r.stdout, re.M | re.I), r.stdout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORTQUANT_LIBRARY")}
    r = subprocess.run(
        [py, "-c", "import ortquant; print(ortquant.library_path())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "pip install onnxruntime (CPU)" in r.stderr, r.stderr
    assert r.stdout.strip().startswith(str(venv)), r.stdout


def test_register_refuses_below_the_oldest_tested_onnxruntime(monkeypatch):
    import onnxruntime

    from ortquant import _library

    so = onnxruntime.SessionOptions()
    monkeypatch.setattr(onnxruntime, "__version__", "1.18.1")
    with pytest.raises(
        RuntimeError, match=r"needs onnxruntime >= " + re.escape(LOWEST) + r".* runs onnxruntime 1\.18\.1"
    ):
        ortquant.register(so)
    assert not _library._is_registered(so)  # nothing was added to the options
    monkeypatch.setattr(onnxruntime, "__version__", LOWEST)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ortquant.register(so)
    assert _library._is_registered(so)


# ---- what the package offers beyond sessions ----------------------------------------------------------------


def test_version_is_the_release_of_pyproject_and_changelog():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert ortquant.__version__ == project["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(ortquant.__version__)}\b", changelog, re.M), "CHANGELOG.md has no entry"


def test_license_file_is_apache_2_and_shipped():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert pyproject["project"]["license-files"] == ["LICENSE"]


def test_license_is_in_the_sdist_and_the_wheel_metadata(tmp_path):
    """What scikit-build-core puts into the sdist and the wheel's .dist-info (no compiler involved)."""
    pytest.importorskip("scikit_build_core")
    import tarfile

    code = (
        "import sys, scikit_build_core.build as b\n"
        "sdist = b.build_sdist(sys.argv[1])\n"
        "print('RESULT', sdist, b.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [s for s in r.stdout.splitlines() if s.startswith("RESULT ")]
    sdist_name, dist_info = line.split()[1:]
    with tarfile.open(tmp_path / sdist_name) as tar:
        top = sdist_name.removesuffix(".tar.gz")
        member = tar.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read() == (ROOT / "LICENSE").read_bytes()
    assert (tmp_path / dist_info / "licenses" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    metadata = (tmp_path / dist_info / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata


def test_get_library_path_is_library_path():
    assert ortquant.get_library_path() == ortquant.library_path()
    assert "get_library_path" in ortquant.__all__


def test_ray_module_is_an_attribute_after_plain_import():
    """README's Ray snippet: ``ortquant.ray.Predictor`` after ``import ortquant``, without importing Ray."""
    out = _ok("import sys, ortquant\nprint(ortquant.ray.Predictor.__name__, 'ray' in sys.modules)")
    assert out.split() == ["Predictor", "False"], out


def test_set_isa_refuses_a_path_this_cpu_lacks():
    from ortquant import kernels

    supported = kernels.supported_isas()
    assert supported[0] == "scalar" and kernels.detected_isa() in supported
    missing = [i for i in kernels.ISAS if i not in supported]
    if not missing:
        pytest.skip("this CPU runs every kernel path")
    before = kernels.active_isa()
    for isa in missing:
        with pytest.raises(ValueError, match=f"cannot run the {isa} path"):
            kernels.set_isa(isa)
        assert kernels.active_isa() == before  # nothing changed
    with pytest.raises(ValueError, match="unknown ISA 'sse9'"):
        kernels.set_isa("sse9")
    try:
        for isa in supported:
            kernels.set_isa(isa.upper())
            assert kernels.active_isa() == isa
    finally:
        kernels.set_isa("")
    assert kernels.active_isa() == before
