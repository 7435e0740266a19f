"""pyproject.toml (pip) and environment.yml (conda) must name the same dependencies."""
import os
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


def test_a_non_editable_install_finds_its_data(tmp_path):
    """pip install (not -e) of a copy of the checkout, used from elsewhere: the devices, rates,
    records and Nsight Compute tables come with the package (perfkit/data), and an estimate works."""
    import shutil
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    for name in ("perfkit", "data"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    code = ("import perfkit.paths as p, perfkit.cli as c; from perfkit import model, specs;"
            "from perfkit.kernels.norm import softmax;"
            "assert str(p.DATA).startswith(%r), p.DATA;"
            "e = model.estimate(softmax.LADDER[5], softmax.EXAMPLE_PROBLEM, 'h100-sxm', banks=False);"
            "print('estimate', e.seconds, model.ncu_table('h200').name, len(specs.names()));"
            "c.main(['info']);"
            # the recorder came with the package, and neither it nor the cluster module loads Dask
            "import sys, perfkit.cluster; c.main(['record', '--list', '--parts', 'ops', '--ops', 'softmax', '--out', 'rec']);"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]") % str(site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "estimate " in out.stdout and "h200-" in out.stdout and "backend" in out.stdout
    assert "ops-softmax" in out.stdout
