"""JupyterLab in a real browser: notebooks 01-04 each run through the UI (Run > Run All Cells) in
headless Chromium, finish with no traceback and show at least one figure and one table; 01
renders a progress widget while it runs, 02-04 their first rung card.  The notebook is then
saved from the UI (File > Save Notebook) and the saved file gets the checks papermill's runs get
(tests/notebook_checks.py: no traceback, no false 'no record', no answer above its prompt), so
each of these notebooks runs once in the suite, here.

Debian's ``chromium`` package, driven by Playwright for Python through ``executable_path``
(Playwright's own browser is never downloaded).  JupyterLab runs on a free port with a fresh
workspace, settings and runtime directory; the notebook is a copy with the ``ci`` profile's
parameters injected (as papermill injects them).  On any failure, or past the deadline, a
screenshot and the server log are kept under ``runs/browser-test/``.

Outside CI the test skips when chromium or playwright is missing; in CI (``.ci/run`` sets
``PERFKIT_REQUIRE_BROWSER=1``) it must run, and a missing piece fails it.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from notebook_checks import BROWSER_NOTEBOOKS, REQUIRED, browser_missing, check_executed

from perfkit import workbook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "01_timing_and_roofline"
DEADLINE_S = float(os.environ.get("PERFKIT_BROWSER_DEADLINE_S", "480"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# set on the page before JupyterLab loads: remember any progress widget that ever renders (tqdm's
# bars close when they finish, so polling alone could miss a short one)
WATCH_PROGRESS = """
window.__perfkitProgress = 0;
new MutationObserver(() => {
  const n = document.querySelectorAll('.jp-OutputArea .widget-hprogress, .jp-OutputArea .widget-vprogress').length;
  if (n > window.__perfkitProgress) window.__perfkitProgress = n;
}).observe(document, {subtree: true, childList: true});
"""

# the state of the notebook's cells, read from the page
CELL_STATE = """
() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!nb) return null;
  const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.innerText.trim());
  const text = nb.innerText;
  return {
    prompts: prompts,
    errors: nb.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').length,
    traceback: /Traceback \\(most recent call last\\)|Error Traceback|---> ?\\d+/.test(text),
    figures: nb.querySelectorAll('.jp-OutputArea-output img, .jp-RenderedImage img').length,
    tables: nb.querySelectorAll('.jp-OutputArea-output table').length,
    cards: [...nb.querySelectorAll('.jp-OutputArea-output details > summary')]
      .filter(s => s.innerText.startsWith('answer for')).length,
    progress: window.__perfkitProgress || 0,
    progressNow: nb.querySelectorAll('.jp-OutputArea .widget-hprogress, .jp-OutputArea .widget-vprogress').length,
  };
}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook_copy(dest: Path, notebook: str = NOTEBOOK) -> Path:
    """A notebook with the ci profile's parameters injected, in a fresh directory."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    prof = workbook.profiles()["ci"]
    params = dict(prof.get("parameters") or {})
    params.update((prof.get("notebooks") or {}).get(notebook) or {})
    nb = load_notebook_node(str(workbook.NOTEBOOKS_DIR / f"{notebook}.ipynb"))
    nb.metadata.pop("jupytext", None)  # a plain notebook: nothing to pair in the workspace
    nb = parameterize_notebook(nb, params)
    out = dest / f"{notebook}.ipynb"
    nbformat.write(nb, out)
    return out


def _settings(dirpath: Path) -> None:
    """JupyterLab user settings: no news or update checks (no network), every cell in the DOM."""
    def put(plugin: str, name: str, doc: dict) -> None:
        p = dirpath / plugin / f"{name}.jupyterlab-settings"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(doc))

    put("@jupyterlab/apputils-extension", "notification", {"checkForUpdates": False, "fetchNews": "false"})
    put("@jupyterlab/notebook-extension", "tracker", {"windowingMode": "none", "autoStartDefaultKernel": True})


@pytest.fixture
def lab(tmp_path, request):
    why = browser_missing()
    if why:
        if REQUIRED:
            pytest.fail(f"PERFKIT_REQUIRE_BROWSER is set but {why}")
        pytest.skip(why)
    work, state = tmp_path / "workspace", tmp_path / "state"
    for d in (work, state / "settings", state / "workspaces", state / "runtime", state / "config", state / "data"):
        d.mkdir(parents=True)
    _settings(state / "settings")
    # no language servers or terminals: nothing the test uses, and a quicker start
    (state / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}}))
    nb = _notebook_copy(work, request.param)
    port, token = _free_port(), uuid.uuid4().hex
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"), "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
           "JUPYTER_CONFIG_DIR": str(state / "config"), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}", "--ServerApp.port_retries=0",
         f"--LabApp.user_settings_dir={state / 'settings'}", f"--LabApp.workspaces_dir={state / 'workspaces'}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
         # the kernel is done when the test ends: stopping the server need not wait the default 5 s
         # for it to leave on its own (3.4 s of each test's teardown, 1.4 s now)
         "--allow-root", "--KernelManager.shutdown_wait_time=0.5"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() - t0 > 60:
                log.flush()
                raise RuntimeError(f"JupyterLab did not start: {(tmp_path / 'jupyterlab.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield {"url": f"{base}/lab/tree/{nb.name}?token={token}", "log": tmp_path / "jupyterlab.log",
               "tmp": tmp_path, "start_s": time.monotonic() - t0, "path": nb, "notebook": request.param}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _keep_evidence(page, lab, why: str) -> Path:
    out = ROOT / "runs" / "browser-test" / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    try:
        page.screenshot(path=str(out / "failure.png"), full_page=True)
    except Exception as exc:  # the page itself may be gone
        (out / "screenshot-failed.txt").write_text(repr(exc))
    shutil.copy(lab["log"], out / "jupyterlab.log")
    (out / "why.txt").write_text(why)
    return out


def _saved(path: Path, n_code: int, deadline: float) -> dict | None:
    """The notebook as JupyterLab saved it, once every code cell in it has run (None: not by
    the deadline)."""
    while time.monotonic() < deadline:
        try:
            nb = json.loads(path.read_text())
            code = [c for c in nb["cells"] if c["cell_type"] == "code"]
            if len(code) == n_code and all(c.get("execution_count") for c in code):
                return nb
        except (OSError, ValueError):
            pass  # being written
        time.sleep(0.3)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("lab", BROWSER_NOTEBOOKS, indirect=True)
def test_notebook_runs_in_jupyterlab_in_chromium(lab):
    from playwright.sync_api import sync_playwright

    name = lab["notebook"]
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    t_start = time.monotonic()
    deadline = t_start + DEADLINE_S
    saved = None
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(lab["tmp"] / "chromium-profile"), executable_path=exe, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        page.add_init_script(WATCH_PROGRESS)
        state, failure = None, None
        try:
            page.goto(lab["url"], timeout=60_000)
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=60_000)
            try:  # a kernel chooser, should JupyterLab still ask: take the notebook's own
                page.click(".jp-Dialog .jp-mod-accept", timeout=3_000)
            except Exception:
                pass
            # the kernel must be up before Run All (else the first cells wait on it anyway)
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                   timeout=60_000)
            t_ready = time.monotonic()

            def run_all():
                page.click(".lm-MenuBar-itemLabel:text-is('Run')")
                page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
                return time.monotonic()

            clicked, tries = run_all(), 1
            started, seen, still_since = False, None, time.monotonic()
            while time.monotonic() < deadline:
                state = page.evaluate(CELL_STATE)
                if state:
                    prompts = state["prompts"]
                    busy = any(p == "[*]:" for p in prompts)
                    started = started or busy or any(p not in ("[ ]:", "") for p in prompts)
                    done = all(p[1:-2].strip().isdigit() for p in prompts) if prompts else False
                    if prompts != seen:
                        seen, still_since = prompts, time.monotonic()
                    # on a loaded machine a Run All sent while the kernel connection settles can be
                    # dropped: nothing queued at all, or (when JupyterLab swaps the kernel it just
                    # started) the first cell run and the rest never queued.  No cell busy, cells
                    # left and nothing changing: the run is not going on, so asking again is safe
                    stuck = not busy and not done and not state["traceback"] and time.monotonic() - still_since > 20
                    if stuck and time.monotonic() - clicked > 20 and tries < 4:
                        clicked, tries = run_all(), tries + 1
                    if started and not busy and (done or state["traceback"]):
                        break
                time.sleep(0.5)
            else:
                failure = f"not finished after {DEADLINE_S:.0f} s; last state {state}"
            if failure is None:
                time.sleep(1.0)  # let the last outputs render
                state = page.evaluate(CELL_STATE)
                if state["traceback"]:
                    failure = "a cell raised: the notebook shows a traceback"
                elif not all(p[1:-2].strip().isdigit() for p in state["prompts"]):
                    failure = f"not every cell ran: prompts {state['prompts']}"
                elif state["figures"] < 1:
                    failure = "no rendered figure"
                elif state["tables"] < 1:
                    failure = "no rendered table"
                elif name == NOTEBOOK and state["progress"] < 1:
                    failure = "no progress widget rendered during the run"
                elif name != NOTEBOOK and state["cards"] < 1:
                    failure = "no rung card ('answer for ...') rendered"
            if failure is None:  # save from the UI; the file on disk then holds every output
                page.click(".lm-MenuBar-itemLabel:text-is('File')")
                page.click(".lm-Menu-itemLabel:text-is('Save Notebook')")
                saved = _saved(lab["path"], len(state["prompts"]), time.monotonic() + 30)
                if saved is None:
                    failure = "File > Save Notebook did not write the executed notebook within 30 s"
            if failure:
                where = _keep_evidence(page, lab, f"{failure}\n{json.dumps(state, indent=1)}")
                pytest.fail(f"{name}: {failure} (screenshot and server log in {where})")
        except pytest.fail.Exception:
            raise
        except Exception as exc:
            where = _keep_evidence(page, lab, f"{exc.__class__.__name__}: {exc}\n{json.dumps(state, indent=1)}")
            pytest.fail(f"{name}: {exc.__class__.__name__}: {exc} (screenshot and server log in {where})")
        finally:
            ctx.close()
    t_end = time.monotonic()
    print(f"{name}: JupyterLab up in {lab['start_s']:.1f} s; page and kernel ready in {t_ready - t_start:.1f} s; "
          f"Run All Cells and save took {t_end - t_ready:.1f} s ({len(state['prompts'])} code cells, "
          f"{state['figures']} figures, {state['tables']} tables, {state['cards']} rung cards, "
          f"{state['progress']} progress widgets seen during the run)")
    check_executed(name, saved)


def test_notebook_copy_carries_the_ci_parameters(tmp_path):
    """The copy the browser runs is notebook 01 with the ci profile's values injected after its
    parameters cell (as papermill injects them), unpaired, with the exercise cells at its end."""
    import nbformat

    nb = nbformat.read(_notebook_copy(tmp_path), as_version=4)
    assert "jupytext" not in nb.metadata
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    i = next(k for k, t in enumerate(tags) if "parameters" in t)
    assert "injected-parameters" in tags[i + 1]
    ci = workbook.profiles()["ci"]["notebooks"][NOTEBOOK]
    for name, value in ci.items():
        assert f"{name} = {value!r}" in nb.cells[i + 1].source
    assert any("grade(" in c.source for c in nb.cells[-6:])
