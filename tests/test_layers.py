"""The package's structure: the layers of [tool.importlinter] hold (no upward import, no
circle across layers), and no module reaches into another's private names."""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "perfkit"


def test_the_import_layers_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports (import-linter) is not installed: pip install -e '.[test]'")
    r = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def _module_name(f: Path) -> str:
    parts = f.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(name: str, f: Path) -> str:
    return name if f.name == "__init__.py" else name.rpartition(".")[0]


def test_no_private_name_crosses_a_module():
    """``from perfkit.x import _y`` and ``x._y`` (x a perfkit module imported here) are private
    names crossing a module.  A private *module* of the same package (norm/_common.py as ``C``,
    exercises/_smem.py) is the package's own; the kernels' ``_ptx``/``_vector`` intrinsics are
    shared by the kernels package."""
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        name = _module_name(f)
        pkg = _package(name, f)
        tree = ast.parse(f.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                if not base.startswith("perfkit"):
                    continue
                for a in node.names:
                    target = f"{base}.{a.name}"
                    is_module = (ROOT / Path(*target.split("."))).with_suffix(".py").exists() or \
                        (ROOT / Path(*target.split("."))).is_dir()
                    if a.name.startswith("_") and not a.name.startswith("__") and not (
                            is_module and (base == pkg or (base.startswith("perfkit.kernels")
                                                           and name.startswith("perfkit.kernels")))) \
                            and a.name not in ("_npcompat", "_simfix", "_simspeed"):
                        bad.append(f"{name}: from {base} import {a.name}")
                    if is_module:
                        aliases[a.asname or a.name] = target
                private_mod = any(p.startswith("_") and not p.startswith("__") for p in base.split(".")[1:])
                if private_mod and not (base.rpartition(".")[0] == pkg
                                        or (name.startswith("perfkit.kernels") and base.startswith("perfkit.kernels"))):
                    bad.append(f"{name}: from {base} import ... (a private module of another package)")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__"):
                target = aliases[node.value.id]
                if target.rpartition(".")[0] != pkg or not Path(*target.split(".")).name.startswith("_"):
                    bad.append(f"{name}: {node.value.id}.{node.attr} ({target})")
    assert not bad, "\n".join(sorted(set(bad)))
