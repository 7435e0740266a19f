"""Nsight Compute: the driver ncu profiles, the unit that runs it, and its raw CSV as the table.

The driver runs each planned rung once unprofiled (compile, warm-up), then, inside
cudaProfilerStart/Stop, a marker kernel and one launch of the rung; ``ncu_table`` splits the
kernels at the markers.  ncu runs with ``--clock-control none`` (clocks as in use; the table keeps
each row's SM clock)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from numba import cuda  # module level: the simulator swaps only a kernel's globals

from perfkit.record import progress
from perfkit.record.plan import Inputs, rebuild
from perfkit.record.resume import read_rows, write_rows

EXIT_FAULT = 4

#: the first H100 run's Nsight Compute table: our column -> the ncu metric it comes from
NCU_COLUMNS = {
    "time_us": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_bytes": "lts__t_bytes.sum",
    "shared_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "shared_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "warp_instructions": "smsp__inst_executed.sum",
    "ffma_thread_instructions": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "tensor_pipe_active_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "sm_clock_hz": "sm__cycles_elapsed.avg.per_second",
}
#: the first table's columns, then where and how this row was taken
NCU_TABLE = ["op", "problem", "rung", "kernel", "time_us", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
             "shared_wavefronts", "shared_bank_conflicts", "warp_instructions", "ffma_thread_instructions",
             "ffma_share_of_warp_instructions", "achieved_occupancy_pct", "issue_active_pct",
             "dram_throughput_pct", "tensor_pipe_active_pct", "registers_per_thread", "sm_clock_hz"]
NCU_EXTRA = ["clock_control", "commit", "gpu"]
#: why warps did not issue (Nsight Compute's warp-state statistics): warps of a scheduler stalled
#: for each reason, per cycle in which it issued (the "Warp State" section's figures; ``selected`` is
#: the warp that issued, 1 when any did).  Written after NCU_EXTRA, so NCU_TABLE stays the first
#: table's columns; a table before 2026-11-28 has none of them.
NCU_STALLS = {f"stall_{r}": f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"
              for r in ("long_scoreboard", "short_scoreboard", "wait", "barrier", "mio_throttle", "lg_throttle",
                        "math_pipe_throttle", "not_selected", "selected", "no_instruction", "dispatch_stall",
                        "branch_resolving", "membar", "sleeping", "tex_throttle", "drain", "misc", "imc_miss")}
NCU_WRITTEN = NCU_TABLE + NCU_EXTRA + list(NCU_STALLS)
#: beside a unit's metrics.csv once ncu refused the stall metrics: the units after it ask for the
#: table's metrics alone (one failed run, not one a unit)
NO_STALLS = "no-stall-metrics"
NCU_MARKER = "perfkit_ncu_marker"
#: clocks as in use (boost), as the first table was taken; ncu's default locks them to base
NCU_CLOCK_CONTROL = "none"

NCU_DRIVER = '''"""Written by perfkit.record: run every planned rung once, for Nsight Compute.
Each rung is prepared and run once outside the profiled range (compile, warm-up), then, inside
cudaProfilerStart/Stop, a marker kernel and one launch of the rung.  perfkit.record's ncu units
run this under `ncu --profile-from-start off` and split the kernels at the markers.
Usage: python ncu_driver.py SPEC (a unit spec whose part is ncu-driver)"""
import runpy
import sys

sys.path.insert(0, {root!r})  # the perfkit that wrote this
sys.argv = ["perfkit.record", "--out", {out!r}, "--unit"] + sys.argv[1:]
runpy.run_module("perfkit.record", run_name="__main__", alter_sys=True)
'''


@cuda.jit
def perfkit_ncu_marker(x):
    """Launched before each rung under ncu: the kernels after it, up to the next, are that rung's."""
    if cuda.grid(1) == 0:
        x[0] += 1


def package_parent() -> Path:
    """The folder perfkit is imported from (a checkout's root): a child started with it first on
    its path runs this same code."""
    return Path(__file__).resolve().parent.parent.parent


def ncu_driver(items: list[dict], manifest: Path, prog=None) -> int:
    """One profiled launch of each item's rung at its own problem, a marker before each; the
    manifest gets a line per rung profiled, in order.  ``prog`` (a
    :class:`perfkit.record.progress.Progress`) is told each item as it starts and ends, with no
    stall limit: ncu replays every kernel, so how long an item may take is not known."""
    import numpy as np

    from perfkit import bench

    mark = cuda.to_device(np.zeros(1, np.int32))
    start = getattr(cuda, "profile_start", lambda: None)  # the simulator has no profiler API
    stop = getattr(cuda, "profile_stop", lambda: None)
    inputs = Inputs()
    with open(manifest, "w") as f:
        for item in items:
            if prog is not None:
                prog.start(item, watch=False)
            try:
                _, p, v = rebuild(item)
                v.supports(p)
                prep = v.prepare(p, inputs(p))
                prep()  # compile and warm up, not profiled
                prep.synchronize()
            except Exception as exc:
                print(f"{item['rung']} @ {item['label']}: not profiled ({exc.__class__.__name__}: {exc})", flush=True)
                if prog is not None:
                    prog.end(item, "not profiled")
                if bench.is_device_fault(exc):
                    return EXIT_FAULT
                continue
            start()
            perfkit_ncu_marker[1, 1](mark)
            prep()
            prep.synchronize()
            stop()
            f.write(json.dumps({"op": p.op, "problem": p.label, "rung": v.label}) + "\n")
            f.flush()
            print(f"{v.label} @ {p.label}: profiled", flush=True)
            if prog is not None:
                prog.end(item, "profiled")
    if prog is not None:
        prog.start(None)
    return 0


def unit_ncu(out: Path, spec: dict, tiny: bool) -> int:
    d = out / "ncu"
    d.mkdir(parents=True, exist_ok=True)
    name = spec["name"]
    manifest = d / f"{name}.manifest.jsonl"
    dspec = d / f"{name}.driver.json"
    dspec.write_text(json.dumps({**spec, "part": "ncu-driver", "manifest": str(manifest)}, default=str))
    if tiny:  # no Nsight Compute in the simulator: the same driver, run directly
        rc = ncu_driver(spec["items"], manifest, progress.Progress(out, name, spec.get("attempt", 1)))
        ran = [json.loads(l) for l in manifest.read_text().splitlines() if l.strip()]
        # a row per rung the driver ran, every metric empty, so that resume and the merged table
        # go through the same code as on a GPU
        rows = [{**r, "kernel": "(rehearsal: not profiled)", "clock_control": "rehearsal, no ncu",
                 "commit": spec["commit"], "gpu": spec["gpu"]} for r in ran]
        write_rows(d / f"{name}.metrics.csv", rows, NCU_WRITTEN)
        print(f"rehearsal: the driver ran {len(ran)} rungs without Nsight Compute (exit {rc}); no metrics")
        return rc
    driver = d / "ncu_driver.py"
    driver.write_text(NCU_DRIVER.format(out=str(out), root=str(package_parent())))
    rep, raw = d / f"{name}.ncu-rep", d / f"{name}.raw.csv"
    stalls = not (d / NO_STALLS).exists()
    while True:
        metrics = list(NCU_COLUMNS.values()) + (list(NCU_STALLS.values()) if stalls else [])
        cmd = ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--clock-control", NCU_CLOCK_CONTROL,
               "--metrics", ",".join(metrics), "-f", "-o", str(rep.with_suffix("")),
               sys.executable, str(driver), str(dspec)]
        print(" ".join(cmd), flush=True)
        rep.unlink(missing_ok=True)
        rc, errors = _run_echoed(cmd)
        rows = []
        if rep.exists():
            with open(raw, "w") as f:
                subprocess.run(["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
                               stdout=f, check=True)
            rows = ncu_table(raw.read_text(), [json.loads(l) for l in manifest.read_text().splitlines() if l.strip()])
        if stalls and not any(_measured(row) for row in rows) and any("issue_stalled" in e or "metric" in e.lower() for e in errors):
            # an ncu that does not know a stall metric profiles nothing: the table's metrics alone
            print(f"ncu refused a stall metric (exit {rc}): again without them", flush=True)
            (d / NO_STALLS).write_text("".join(errors))
            stalls = False
            continue
        break
    if not rep.exists():
        print(f"ncu wrote no report (exit {rc})")
        return 1
    for row in rows:
        row.update(clock_control=NCU_CLOCK_CONTROL, commit=spec["commit"], gpu=spec["gpu"])
    write_rows(d / f"{name}.metrics.csv", rows, NCU_WRITTEN)
    print(f"{len(rows)} kernel rows for {name}")
    return 0 if rc == 0 else 1


def _run_echoed(cmd: list[str]) -> tuple[int, list[str]]:
    """Run ``cmd``, echoing its output line by line (the unit's log stays live), and return its exit
    status with ncu's ``==ERROR==`` lines."""
    errors = []
    with subprocess.Popen(cmd, cwd=package_parent(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith("==ERROR=="):
                errors.append(line)
    return proc.returncode, errors


def _measured(row: dict) -> bool:
    t = row.get("time_us")
    return isinstance(t, float) and t == t


_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}  # -> microseconds


def _to_float(text: str) -> float:
    try:
        return float(str(text).replace(",", "").strip())
    except ValueError:
        return float("nan")


def _base(value: float, unit: str, column: str) -> float:
    """A value in ncu's unit as the table's unit: us for time, bytes, Hz, plain counts and %."""
    u = (unit or "").strip().lower()
    if column == "time_us":
        return value * _TIME.get(u, 1e-3)  # base unit: nsecond
    if column.endswith("_bytes") and u.endswith("byte"):
        return value * _SCALE.get(u[:-4], 1.0)
    if column == "sm_clock_hz":
        if u.endswith("hz"):
            return value * _SCALE.get(u[:-2], 1.0)
        if "/" in u:  # cycle/nsecond, cycle/usecond, cycle/second
            return value / (_TIME.get(u.split("/", 1)[1], 1e6) / 1e6)
    return value


def short_kernel_name(name: str) -> str:
    """``perfkit::kernels::gemm::gemm_naive[abi:v1,cw51...](Array<...>)`` -> ``gemm_naive``;
    library kernels (``sm80_xmma_gemm_...``) keep their name, cut to 60 characters."""
    import re

    head = name.split("(", 1)[0]
    head = re.sub(r"\[abi:[^\]]*\]", "", head)
    head = re.sub(r"<.*>$", "", head)  # template arguments
    head = head.rsplit("::", 1)[-1].split(" ")[-1]
    return head[:60] or name[:60]


def ncu_table(raw_csv: str, manifest: list[dict]) -> list[dict]:
    """Rows of the metrics table from ``ncu --csv --page raw`` output: one per kernel launch,
    attributed to the rung named by the marker launch before it (markers themselves dropped)."""
    lines = [l for l in raw_csv.splitlines() if l.startswith('"')]  # drop ==PROF== and app output
    table = list(csv.reader(lines))
    if len(table) < 2:
        return []
    header, units, body = table[0], table[1], table[2:]
    if units and units[0] and units[0] != "":  # no units row (older ncu): the first row is data
        body, units = table[1:], [""] * len(header)
    col = {h: i for i, h in enumerate(header)}
    name_col = col.get("Kernel Name", col.get("Function Name"))
    id_col = col.get("ID")
    body.sort(key=lambda r: _to_float(r[id_col]) if id_col is not None else 0)
    rows, rung = [], -1
    for r in body:
        kernel = r[name_col] if name_col is not None else ""
        if NCU_MARKER in kernel:
            rung += 1
            continue
        if not 0 <= rung < len(manifest):
            continue  # a kernel outside any marked rung (should not happen)
        row = {**manifest[rung], "kernel": short_kernel_name(kernel)}
        for ours, metric in (NCU_COLUMNS | NCU_STALLS).items():
            i = col.get(metric)
            row[ours] = _base(_to_float(r[i]), units[i] if i < len(units) else "", ours) if i is not None else float("nan")
        w, f = row.get("warp_instructions"), row.get("ffma_thread_instructions")
        row["ffma_share_of_warp_instructions"] = f / 32 / w if w and w == w and f == f else float("nan")
        rows.append(row)
    return rows


def merge_ncu(out: Path, log) -> None:
    parts = sorted((out / "ncu").glob("*.metrics.csv")) if (out / "ncu").exists() else []
    rows = read_rows(parts)
    if rows:
        write_rows(out / "ncu_metrics_all_rungs.csv", rows, NCU_WRITTEN)
        log(f"[ncu] {out / 'ncu_metrics_all_rungs.csv'}: {len(rows)} kernel rows")
