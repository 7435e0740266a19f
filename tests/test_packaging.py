"""pyproject.toml (pip) and environment.yml (conda) must name the same dependencies."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"numba", "numba-cuda", "cupy-cuda13x", "numpy", "pandas", "matplotlib", "seaborn", "pyyaml",
            "tqdm", "papermill", "ipykernel", "jupyterlab", "nvidia-ml-py", "pytest"}


def _name(req: str) -> tuple[str, str]:
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)", req)
    return m.group(1).lower().replace("_", "-"), (m.group(2) or "") + m.group(3).replace(" ", "")


def pip_deps() -> dict:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = doc["project"]["dependencies"] + doc["project"]["optional-dependencies"]["test"]
    return dict(_name(r) for r in reqs)


def conda_deps() -> dict:
    doc = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for d in doc["dependencies"]:
        for r in (d["pip"] if isinstance(d, dict) else [d]):
            name, spec = _name(r)
            if name not in ("python", "pip"):
                out[name] = spec
    return out


def test_same_dependencies_and_versions():
    pip, conda = pip_deps(), conda_deps()
    assert set(pip) == set(conda), f"only in pyproject: {set(pip) - set(conda)}; only in environment.yml: {set(conda) - set(pip)}"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pyproject says {pip[name]!r}, environment.yml {conda[name]!r}"


def test_required_dependencies_present():
    assert REQUIRED <= set(pip_deps())


def test_numba_cuda_brings_cuda_13_libraries():
    assert pip_deps()["numba-cuda"].startswith("[cu13]")


def test_readme_quick_start_is_two_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```", 2)[1]
    cmds = [l for l in block.splitlines()[1:] if l.strip() and not l.strip().startswith("#")]
    assert cmds == ["make run", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
