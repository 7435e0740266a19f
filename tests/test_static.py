"""The static store (data/static/): it covers every rung, it answers as a build would, and it
cannot fall behind the kernels unnoticed."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit import anatomy, static

ROOT = Path(__file__).resolve().parent.parent
FIX = "perfkit static refresh (make static)"


def test_every_rung_has_a_store_entry():
    gone = static.missing()
    assert not gone, (f"{len(gone)} rung(s) changed since the static store was refreshed; run `{FIX}` "
                      f"and commit data/static/: " + "; ".join(gone))


def test_the_staleness_check_names_a_kernel_edited_without_a_refresh(tmp_path):
    """A test of the test: a copy of perfkit with one kernel file edited (a comment is enough: the
    store cannot tell a comment from code) reports that op's rungs, and only those."""
    shutil.copytree(ROOT / "perfkit", tmp_path / "perfkit", ignore=shutil.ignore_patterns("__pycache__"))
    f = tmp_path / "perfkit" / "kernels" / "norm" / "rmsnorm.py"
    f.write_text(f.read_text() + "\n# an edit\n")
    code = "from perfkit import static; print('\\n'.join(static.missing(['rmsnorm', 'softmax'])))"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PERFKIT_STATIC_DIR": str(static.store_dir())}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert any(x.startswith("rmsnorm 01 naive @") for x in lines), r.stdout
    assert not any(x.startswith("softmax") for x in lines), r.stdout


def test_a_cached_answers_code_version_follows_its_code_not_its_comments(tmp_path, monkeypatch):
    """Keys carry the version of the code that computes the answer, derived from its text: an
    edit to comments, blank lines or trailing space keeps it; an edit to code, a '#' inside a
    string included, changes it. The producers named are real files."""
    from perfkit import cache

    monkeypatch.setattr(cache, "PACKAGE", tmp_path)
    f = tmp_path / "m.py"
    f.write_text('def f(x):\n    return x + 1  # one more\n')
    v = cache.code_version("m.py")
    f.write_text('# a new comment\n\ndef f(x):   \n\n    return x + 1\n')
    assert cache.code_version("m.py") == v
    f.write_text('def f(x):\n    return x + 2\n')
    assert cache.code_version("m.py") != v
    f.write_text('def f(x):\n    return x + 1, "# one more"\n')
    assert cache.code_version("m.py") != v
    monkeypatch.undo()
    for kind in static.KINDS:
        assert len(static.producer_version(kind)) == 16
    # a module added to the access simulation must join its producers, or its edits go unseen
    # (__init__ only re-exports, __main__ only starts the child)
    pkg = ROOT / "perfkit" / "banks"
    made = {f"banks/{p.name}" for p in pkg.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert made <= set(static.PRODUCERS["banks"]), made - set(static.PRODUCERS["banks"])


def test_a_rungs_source_hash_does_not_depend_on_where_its_files_lie(monkeypatch):
    """A rung of an old commit reaches files in the history cache and in the checkout; their
    absolute paths sort one way or the other depending on where each lies (/tmp/x and
    /tmp/x-cache, or ~/.cache and /work): the hash must be the same either way, or a fresh clone
    misses the store."""
    from perfkit.kernels import saxpy

    v = saxpy.LADDER[1]
    files = static.source_files(type(v).__module__)
    assert len(files) > 2
    assert static.package_path(files[0]).startswith("perfkit/")
    monkeypatch.setattr(static, "source_files", lambda name: list(files))
    h = static.source_hash(v)
    monkeypatch.setattr(static, "source_files", lambda name: list(reversed(files)))
    assert static.source_hash(v) == h


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFKIT_STATIC_DIR", str(tmp_path / "store"))
    return tmp_path


def test_a_store_entry_answers_as_the_build_did_and_builds_ptx_when_asked(fresh, monkeypatch):
    from perfkit.kernels.norm import softmax

    v = softmax.LADDER[3]
    p = softmax.Problem(rows=7, cols=37)
    monkeypatch.setenv("PERFKIT_STATIC_WRITE", "1")
    built = anatomy.inspect(v, p, (9, 0))
    [entry] = static.entries("anatomy")
    doc = json.loads(entry.read_text())
    assert doc["what"].startswith(v.label) and doc["tools"] == anatomy._versions()
    assert "ptx" not in doc["answer"]["launches"][0] and isinstance(doc["answer"]["launches"][0]["sass"], list)
    monkeypatch.setenv("PERFKIT_STATIC_WRITE", "0")
    shutil.rmtree(fresh / "cache")
    stored = anatomy.inspect(v, p, (9, 0))
    assert stored.summary() == built.summary() and stored.mix == built.mix
    assert str(stored.hot_loop) == str(built.hot_loop)
    # built on first read (another build: Numba may emit device functions in another order)
    assert stored.ptx.startswith("//") and stored.cubin[:4] == b"\x7fELF"
    assert anatomy._entry_name(stored.ptx) == anatomy._entry_name(built.ptx)


def test_an_entry_of_other_tool_versions_is_not_used(fresh):
    k = "0" * 32
    static_dir = fresh / "store" / "anatomy"
    static_dir.mkdir(parents=True)
    (static_dir / f"{k}.json").write_text(json.dumps({"tools": {"numba-cuda": "0.1"}, "answer": {"x": 1}}))
    assert static.get("anatomy", k, {"numba-cuda": "0.30.4"}) is None
    assert static.get("anatomy", k, {"numba-cuda": "0.1"}) == {"x": 1}
    assert static.put("anatomy", "1" * 32, {"y": 2}, what="w") is None  # not refreshing: nothing written
    assert not (static_dir / ("1" * 32 + ".json")).exists()
    with pytest.raises(static.StaticError, match="no store kind"):
        static.get("sass", k)


def test_refresh_names_an_unknown_op(capsys):
    from perfkit import refresh

    assert refresh.cli(["refresh", "--ops", "gemm,nope"]) == 2
    assert "no op nope" in capsys.readouterr().err


def test_the_top_package_init_is_in_no_rung_closure():
    """perfkit/__init__.py chooses the backend and applies the simulator's patches: no kernel
    code, so editing it must not change any store key (package __init__ files below it count)."""
    from perfkit.kernels.norm import softmax

    files = [Path(f).as_posix() for f in static.source_files(softmax.__name__)]
    assert not any(f.endswith("/perfkit/__init__.py") for f in files), files
    assert any(f.endswith("/perfkit/kernels/norm/__init__.py") for f in files)
