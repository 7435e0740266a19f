"""The anatomy view, checked against NVIDIA's own tools on the same cubin, with no GPU."""
import importlib
import pkgutil
import re
import subprocess
import time

import pytest

from perfkit import _anatomy_examples as ex
from perfkit import anatomy, static
import perfkit.kernels


def _res_usage(report):
    """REG/SHARED/STACK of the entry function, read independently with cuobjdump."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(report.cubin)
        f.flush()
        out = subprocess.run([anatomy.tool_path("cuobjdump"), "-res-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    entry = re.search(r"\.entry\s+([\w$.]+)", report.ptx).group(1)
    line = out.split(f"Function {entry}:", 1)[1].splitlines()[1]
    return {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}


def _ladder_cases():
    """Every non-oracle rung of every op module that has a LADDER and an EXAMPLE_PROBLEM."""
    cases = []
    for info in pkgutil.walk_packages(perfkit.kernels.__path__, "perfkit.kernels."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name.endswith(".base"):
            continue
        mod = importlib.import_module(info.name)
        ladder, problem = getattr(mod, "LADDER", None), getattr(mod, "EXAMPLE_PROBLEM", None)
        if ladder and problem is not None:
            cases += [pytest.param(v, v.example(problem), id=f"{info.name.rsplit('.', 1)[-1]}-{v.label}")
                      for v in ladder if not v.oracle]
    return cases


def _full_report_checks(r, cc):
    assert r.cc == cc and 1 <= r.registers <= 255 and r.threads_per_block >= 1
    assert 0 < r.occupancy.ratio <= 1 and r.occupancy.limiter in ("registers", "shared memory", "warps", "blocks")
    assert r.instructions > 0 and "EXIT" in r.sass
    assert str(r) and "<table>" in r._repr_html_()


@pytest.mark.parametrize("variant, problem", _ladder_cases())
def test_every_rung_gets_a_full_report(variant, problem):
    """Every rung's sm_90 report as the notebooks get it (from the static store, no rebuild),
    its registers, shared memory and stack as cuobjdump -res-usage printed them for that build."""
    r = anatomy.inspect(variant, problem, cc=(9, 0))
    _full_report_checks(r, (9, 0))
    entry = static.get("anatomy", anatomy.static_key(variant, problem, (9, 0)))
    assert entry is not None, "no store entry: run `perfkit static refresh` (tests/test_static.py names them)"
    launch = entry["launches"][0]
    line = launch["res_usage"].split(f"Function {launch['entry']}:", 1)[1].splitlines()[1]
    u = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
    assert (u["REG"], u["SHARED"], u["STACK"]) == (r.registers, r.static_shared_bytes, r.stack_bytes)


def _top_rungs():
    """The fresh builds below: GEMM's last rung for sm_90 (the heaviest path: LTO, inline PTX,
    dynamic shared memory past 48 KiB, setmaxnreg) and for sm_80 (which ptxas refuses: wgmma, TMA
    and clusters are Hopper's), one SIMT GEMM rung for sm_80, and each other ladder's first rung
    for sm_90.  The path is the same for every kernel (every rung's stored report is checked
    against cuobjdump's figures above), so a heavier rung a ladder, or a second target for every
    op, would spend a minute or two of compiling to test it again."""
    cases, first, last = _ladder_cases(), {}, {}
    for c in cases:
        first.setdefault(c.id.split("-", 1)[0], c)
        last[c.id.split("-", 1)[0]] = c
    simt = next(c for c in cases if c.id.startswith("gemm-") and c.values[0].name == "double_buffer")
    picks = [last["gemm"]] + [c for op, c in first.items() if op != "gemm"]
    out = [pytest.param(*c.values, (9, 0), id=f"{c.id}-sm90") for c in picks]
    return out + [pytest.param(*c.values, (8, 0), id=f"{c.id}-sm80") for c in (simt, last["gemm"])]


@pytest.mark.parametrize("variant, problem, cc", _top_rungs())
def test_a_fresh_build_gives_a_full_report_that_cuobjdump_agrees_with(variant, problem, cc):
    """The whole path once an op, not once a rung: compile now (PTX, cubin), and read the cubin
    independently with cuobjdump."""
    if ".gemm.hopper" in variant.__module__ and cc < (9, 0):  # wgmma, TMA are Hopper's: ptxas says so
        with pytest.raises(anatomy.AnatomyError, match="not supported on .target 'sm_80'"):
            anatomy.inspect(variant, problem, cc=cc)
        return
    r = anatomy.inspect(variant, problem, cc=cc)
    _full_report_checks(r, cc)
    assert r.ptx.startswith("//") and r.cubin[:4] == b"\x7fELF"
    u = _res_usage(r)
    assert (u["REG"], u["SHARED"], u["STACK"]) == (r.registers, r.static_shared_bytes, r.stack_bytes)


def test_registers_agree_with_ptxas_and_cuobjdump():
    v, p = ex.LOCAL
    r = anatomy.inspect(v, p, (8, 6))
    u = _res_usage(r)
    m = re.search(r"Used (\d+) registers", r.ptxas_log)
    assert int(m.group(1)) == u["REG"] == r.registers
    assert r.stack_bytes == u["STACK"] >= 64 * 4  # the dynamically indexed float32[64] lives on the stack
    assert r.mix["local load/store"] > 0


def test_a_register_cap_shows_spills():
    v, p = ex.SPILLS
    r = anatomy.inspect(v, p, (9, 0))
    assert r.registers <= 32
    assert r.spill_store_bytes > 0 and r.spill_load_bytes > 0
    assert r.mix["local load/store"] > 0


def test_128_bit_loads_show_in_the_mix():
    v, p = ex.VEC4
    r = anatomy.inspect(v, p, (9, 0))
    assert r.mix["global load 128"] >= 1
    assert re.search(r"LDG\.E\.128", r.sass)
    narrow = anatomy.inspect(*ex.LOCAL, (9, 0))
    assert narrow.mix["global load 128"] == 0 and narrow.mix["global load 32"] > 0


def test_diff_between_rungs_and_targets():
    from perfkit.kernels import saxpy

    p = saxpy.EXAMPLE_PROBLEM
    a, b = anatomy.inspect(saxpy.LADDER[1], p, (9, 0)), anatomy.inspect(saxpy.LADDER[3], p, (9, 0))
    d = anatomy.diff(a, b)
    regs = next(r for r in d.rows if r[0] == "registers")
    assert regs[1:3] == (a.registers, b.registers)
    assert d.mix and all(after - before == delta for before, after, delta in d.mix.values())
    assert "anatomy diff" in str(d) and "<table>" in d._repr_html_()
    d2 = anatomy.diff(a, anatomy.inspect(saxpy.LADDER[1], p, (7, 5)))
    # the target as built (Numba builds sm_90a from 9.0 on), as the card's own header names it
    assert next(r for r in d2.rows if r[0] == "target")[1:3] == (a.arch or "sm_90", "sm_75") == ("sm_90a", "sm_75")


def test_the_cards_instruction_mix_bars_write_every_count_beside_its_bar():
    """A card's mix is drawn in HTML (no figure to render): each class that either side has, each
    side's count written once per bar, bar lengths in proportion, and a diff of one rung at two
    targets keeps both sides apart."""
    import re

    from perfkit.anatomy.report import _mix_html

    a = {"fp32 fma": 40, "global load 32": 10, "barrier": 0}
    b = {"fp32 fma": 20, "global load 32": 0, "barrier": 5}
    h = _mix_html({"x": a, "y": b}, "instruction mix")
    widths = [float(w) for w in re.findall(r"width:([0-9.]+)px", h)]
    counts = [int(c) for c in re.findall(r"margin-left:3px'>(\d+)<", h)]
    classes = [c for c in anatomy.MIX_CLASSES if a.get(c) or b.get(c)]
    assert counts == [m.get(c, 0) for c in classes for m in (a, b)]
    assert widths == [round(240 * n / 40) for n in counts]
    assert "&#9632;</span> x" in h and "&#9632;</span> y" in h
    from perfkit.kernels import saxpy

    r = anatomy.inspect(saxpy.LADDER[1], saxpy.EXAMPLE_PROBLEM, (9, 0))
    r80 = anatomy.inspect(saxpy.LADDER[1], saxpy.EXAMPLE_PROBLEM, (8, 0))
    same = anatomy.diff(r, r80)._repr_html_()
    assert f"{r.variant} ({r.arch})" in same and f"{r.variant} ({r80.arch or 'sm_80'})" in same


def test_warm_report_is_fast():
    from perfkit.kernels import saxpy

    anatomy.inspect(saxpy.LADDER[2], saxpy.EXAMPLE_PROBLEM, (8, 9))
    t0 = time.perf_counter()
    anatomy.inspect(saxpy.LADDER[2], saxpy.EXAMPLE_PROBLEM, (8, 9))
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("cc", [(7, 0), (5, 2), (99, 0), "nine", (9,)])
def test_unsupported_target_is_named(cc):
    from perfkit.kernels import saxpy

    with pytest.raises(anatomy.AnatomyError, match="compute capability"):
        anatomy.inspect(saxpy.LADDER[1], saxpy.EXAMPLE_PROBLEM, cc=cc)


def test_oracle_has_nothing_to_inspect():
    from perfkit.kernels import saxpy

    with pytest.raises(anatomy.AnatomyError, match="oracle"):
        anatomy.inspect(saxpy.LADDER[0], saxpy.EXAMPLE_PROBLEM)


def test_a_problem_the_rung_cannot_take_is_unsupported_in_inspect_and_estimate():
    """A float32-only rung asked for float16: the rung's UnsupportedProblem (what callers skip
    on), still an AnatomyError, from anatomy and from the model alike."""
    from perfkit import model
    from perfkit.kernels import gemm
    from perfkit.kernels.base import UnsupportedProblem

    p = gemm.Problem(m=40, n=24, k=16, dtype="float16")
    for call in (lambda: anatomy.inspect(gemm.LADDER[1], p), lambda: model.estimate(gemm.LADDER[1], p)):
        with pytest.raises(UnsupportedProblem, match="float32"):
            call()
    with pytest.raises(anatomy.AnatomyError, match="cannot take"):
        anatomy.inspect(gemm.LADDER[1], p)


def test_a_kernel_that_fails_to_compile_names_target_and_message():
    with pytest.raises(anatomy.AnatomyError, match=r"sm_90.*(TypingError|No implementation|typing)"):
        anatomy.inspect(ex.Broken(), ex.Problem(n=16, dtype="float32"), (9, 0))


@pytest.mark.parametrize("sass, cls", [
    ("/*0100*/ FFMA R4, R2, R3, R4 ;", "fp32 fma"),
    ("/*0100*/ @P0 LDG.E.128 R4, desc[UR4][R2.64] ;", "global load 128"),
    ("/*0100*/ LDG.E R4, desc[UR4][R2.64] ;", "global load 32"),
    ("/*0100*/ LDG.E.64.CONSTANT R4, desc[UR4][R2.64] ;", "global load 64"),
    ("/*0100*/ STS.128 [R3], R4 ;", "shared store 128"),
    ("/*0100*/ LDS R4, [R3] ;", "shared load 32"),
    ("/*0100*/ HMMA.16816.F32 R4, R8, R12, R4 ;", "tensor mma"),
    ("/*0100*/ BAR.SYNC.DEFER_BLOCKING 0x0 ;", "barrier"),
    ("/*0100*/ @!P0 BRA 0x200 ;", "branch/control"),
    ("/*0100*/ IMAD.WIDE R2, R0, 0x4, R2 ;", "integer/address"),
    ("/*0100*/ MUFU.EX2 R3, R3 ;", "special function"),
    ("/*0100*/ SHFL.BFLY PT, R3, R2, 0x1, 0x1f ;", "shuffle"),
    ("/*0100*/ HFMA2 R4, R2.H0_H0, R3.H0_H0, -RZ ;", "fp16/bf16"),
    # ptxas loads 32-bit constants as -0 * 0 + (imm, imm): a move, not fp16 math
    ("/*08e0*/ HFMA2.MMA R13, -RZ, RZ, 0.96630859375, -0.0022525787353515625 ;", "move/other"),
    # sm_100: packed fp32 pairs and 256-bit global accesses
    ("/*0100*/ FFMA2 R4, R2.F32x2.HI_LO, R6.F32, R4.F32x2.HI_LO ;", "fp32 fma"),
    ("/*0100*/ FADD2 R4, R2.F32x2.HI_LO, R6.F32x2.HI_LO ;", "fp32 add"),
    ("/*0100*/ FMUL2 R4, R2.F32x2.HI_LO, R6.F32x2.HI_LO ;", "fp32 mul"),
    ("/*0100*/ LDG.E.ENL2.256 R4, R8, desc[UR4][R2.64] ;", "global load 256"),
    ("/*0100*/ STG.E.ENL2.256 desc[UR4][R2.64], R4, R8 ;", "global store 256"),
    ("/*0100*/ DFMA R4, R2, R6, R4 ;", "fp64"),
    ("/*0100*/ DADD R4, R2, R6 ;", "fp64"),
])
def test_instruction_classes(sass, cls):
    mix = anatomy.instruction_mix(sass)
    assert mix[cls] == 1 and sum(mix.values()) == 1


def test_cli(capsys):
    assert anatomy.cli(["saxpy", "naive", "--cc", "8.0", "--diff", "3"]) == 0
    out = capsys.readouterr().out
    assert "anatomy of 01 naive" in out and "anatomy diff" in out
    assert anatomy.cli(["saxpy", "99"]) == 2
    assert "no rung '99'" in capsys.readouterr().err
    # a misspelt or malformed --size names the problem's fields instead of a Python traceback
    assert anatomy.cli(["gemm", "1", "--size", "q=3"]) == 2
    assert "no field 'q'; its fields: m, n, k, dtype" in capsys.readouterr().err
    assert anatomy.cli(["gemm", "1", "--size", "m"]) == 2
    assert "must look like FIELD=VALUE" in capsys.readouterr().err


def test_cli_reports_any_launch_of_a_rung_of_several(capsys):
    """``--launch N``: the N-th launch of a rung of several (conv im2col_gemm: the gather into the
    buffer, then the GEMM), not always the first; past the last, a one-line error."""
    from perfkit.kernels import conv

    v = next(x for x in conv.LADDER if x.name == "im2col_gemm")
    p = v.example(conv.EXAMPLE_PROBLEM)
    names = [s["kernel"] for s in anatomy.inspect(v, p, (9, 0)).launches]
    assert len(names) >= 2 and names[0] != names[1]
    def kernel_line(out):
        return next(line for line in out.splitlines() if line.strip().startswith("kernel "))

    assert anatomy.cli(["conv", "im2col_gemm"]) == 0
    assert names[0] in kernel_line(capsys.readouterr().out)
    assert anatomy.cli(["conv", "im2col_gemm", "--launch", "1"]) == 0
    assert names[1] in kernel_line(capsys.readouterr().out)
    assert anatomy.cli(["conv", "im2col_gemm", "--launch", str(len(names))]) == 2
    assert "out of range" in capsys.readouterr().err


def test_built_as_numba_builds_for_a_launch():
    """The cubin is the one Numba's own kernel compiler makes (LTO when nvJitLink is there, the
    arch-specific target from 9.0 on), and the 1 KiB system reservation, already inside the
    sm_90 cubin's shared section, is charged once."""
    from perfkit.kernels import gemm

    v = gemm.LADDER[3]  # shared-memory tiling: static shared memory, no dynamic
    p = v.example(gemm.EXAMPLE_PROBLEM)
    r80, r90 = anatomy.inspect(v, p, (8, 0)), anatomy.inspect(v, p, (9, 0))
    assert r90.static_shared_bytes == r80.static_shared_bytes + 1024  # .nv.reservedSmem on sm_90
    assert r80.occupancy.shared_per_block == r90.occupancy.shared_per_block == r80.static_shared_bytes + 1024
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(r90.cubin)
        f.flush()
        head = subprocess.run([anatomy.tool_path("cuobjdump"), "-elf", f.name],
                              capture_output=True, text=True, check=True).stdout
    assert "sm_90a" in head


@pytest.mark.parametrize("ptxas", [{"static_shared_bytes": 8192}, {"static_shared_bytes": 0}, {},
                                   {"static_shared_bytes": 9216}])
def test_reservation_charged_once_whatever_ptxas_reports(ptxas):
    """On the H100 machine ptxas's report gave no reservation to subtract (no "bytes smem", parsed
    as 0, or a figure holding it already), so the sm_90 cubin's 9216 counted as the kernel's and
    the 1 KiB was charged twice (10240 vs 9216). The cubin's .nv.reservedSmem decides then."""
    cubin = b"...\x00.nv.reservedSmem\x00..."
    assert anatomy._reserved_in_cubin((9, 0), 9216, ptxas, cubin) == 1024
    assert anatomy._reserved_in_cubin((8, 0), 8192, {"static_shared_bytes": 8192}, b"") == 0
    assert anatomy._reserved_in_cubin((9, 0), 0, ptxas, cubin) == 0  # no shared memory: nothing reserved


def test_a_kernel_numba_links_with_cudadevrt_is_inspected():
    """A grid-wide barrier makes Numba link cudadevrt: the report (and ptxas's spill report,
    taken from the same link) must include it rather than fail on an unresolved extern."""
    v, p = ex.GRID_SYNC
    r = anatomy.inspect(v, p, (9, 0))
    u = _res_usage(r)
    assert (u["REG"], u["STACK"]) == (r.registers, r.stack_bytes)
    m = re.search(r"Used (\d+) registers", r.ptxas_log.split("Compiling entry function")[-1])
    assert m and int(m.group(1)) == r.registers and "\x00" not in r.ptxas_log


def test_report_names_the_arch_and_the_reservation():
    from perfkit.kernels import gemm

    v = gemm.LADDER[3]
    p = v.example(gemm.EXAMPLE_PROBLEM)
    r80, r90 = anatomy.inspect(v, p, (8, 0)), anatomy.inspect(v, p, (9, 0))
    assert (r80.arch, r90.arch) == ("sm_80", "sm_90a")
    assert (r80.reserved_shared_bytes, r90.reserved_shared_bytes) == (0, 1024)
    assert "sm_90a" in str(r90) and "1024 the system's reservation" in str(r90)
    assert r90.summary()["arch"] == "sm_90a" and "(sm_80) -> " in str(anatomy.diff(r80, r90))


# --- loops and the hot loop (issue 13) ---------------------------------------------------------
def test_an_out_of_line_slow_path_is_not_a_loop():
    """ptxas puts an mbarrier wait's retry past EXIT (GEMM rung 21 tma at sm_90a): a forward
    branch into it, a spin loop there, an unconditional BRA back to the instruction after the
    forward branch.  That BRA closes no loop (read as one it wrapped the epilogue's stores into
    the k-loop: 1,766 instructions an iteration); the spin loop and the k-loop are loops."""
    sass = """
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ ;
        /*0020*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR11], R11 ;
        /*0030*/              @!P0 BRA 0x90 ;
        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], R24 ;
        /*0050*/               @P1 BRA 0x10 ;
        /*0060*/                   STG.E desc[UR20][R2.64], R24 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR11], R11 ;
        /*00a0*/              @!P0 BRA 0x90 ;
        /*00b0*/                   BRA 0x40 ;
    """
    loops = anatomy.find_loops(sass)
    assert [(lp.start, lp.end) for lp in loops] == [(0x10, 0x50), (0x90, 0xa0)]
    assert all(lp.depth == 0 for lp in loops) and "global store 32" not in str(loops[0].mix)
    # a BRA back to the top of a loop from a block reached by falling through is a loop
    inline = sass.replace("/*0030*/              @!P0 BRA 0x90 ;", "/*0030*/                   NOP ;")
    assert (0x40, 0xb0) in [(lp.start, lp.end) for lp in anatomy.find_loops(inline)]


def test_no_loop_has_no_hot_loop():
    rep = anatomy.inspect(*ex.WIDE)
    assert rep.loops == [] and rep.hot_loop is None


def test_hot_loop_mix_of_fma_chains():
    rep = anatomy.inspect(*ex.FMA_LOOP)
    hot = rep.hot_loop
    assert hot is not None and hot.innermost
    # four FMA chains per source iteration: any unroll keeps a multiple of 4 FMAs per iteration
    assert hot.mix["fp32 fma"] >= 4 and hot.mix["fp32 fma"] % 4 == 0
    for lp in rep.loops:
        assert lp.mix.get("fp32 fma", 0) % 4 == 0
    # exactly one back edge closes each loop: one branch per iteration
    assert hot.mix["branch/control"] >= 1
    assert set(hot.mix) <= set(anatomy.MIX_CLASSES)


def test_find_loops_on_a_listing():
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   LDS R2, [R0] ;
        /*0030*/                   FFMA R3, R2, R2, R3 ;
        /*0040*/                   FFMA R4, R2, R2, R4 ;
        /*0050*/                   LDS R5, [R0+0x80] ;
        /*0060*/                   FFMA R6, R5, R5, R6 ;
        /*0070*/               @P0 BRA 0x50 ;
        /*0080*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0090*/               @P1 BRA 0x20 ;
        /*00a0*/                   EXIT ;
        /*00b0*/                   BRA 0xb0;
    """
    loops = anatomy.find_loops(sass)
    assert [(lp.start, lp.end) for lp in loops] == [(0x20, 0x90), (0x50, 0x70)]
    outer, inner = loops
    assert inner.parent == 0 and inner.depth == 1 and inner.innermost and not outer.innermost
    assert inner.mix == {"shared load 32": 1, "fp32 fma": 1, "branch/control": 1}
    assert outer.own_mix["fp32 fma"] == 2 and outer.own_mix["shared load 32"] == 1
    assert anatomy.hot_loop_of(loops) is inner
    # sm_100 closes a uniform loop with the predicate as an operand (BRA.U UP0, target); a
    # listing with that form has the same loops (the what-if on a B200 saw none before)
    sm100 = sass.replace("@P1 BRA 0x20", "BRA.U UP0, 0x20").replace("@P0 BRA 0x50", "@!P2 BRA !P3, 0x50")
    assert [(lp.start, lp.end) for lp in anatomy.find_loops(sm100)] == [(0x20, 0x90), (0x50, 0x70)]


def test_cache_key_is_the_rungs_code_closure():
    """The cache key covers the rung's module and every perfkit module it reaches (helpers,
    base.py), not unrelated ladders, so one engineer's edit to conv does not recompile norm."""
    files = {f.replace("\\", "/").split("perfkit/", 1)[1] for f in static.source_files("perfkit.kernels.norm.softmax")}
    assert {"kernels/base.py", "kernels/norm/_common.py", "kernels/norm/softmax.py"} <= files
    assert not any(f.startswith("kernels/conv") for f in files) and not any(f.startswith(("model.py", "model/")) for f in files)


def test_cli_op_names_accept_bare_norm_ops():
    from perfkit.kernels.norm import softmax
    assert anatomy._op_module("softmax") is softmax
    assert anatomy._op_module("norm.softmax") is softmax
    with pytest.raises(anatomy.AnatomyError, match="one of .*gemm.*softmax"):
        anatomy._op_module("nosuch")


# --- the per-kernel build cache ---------------------------------------------------------------
def test_one_kernel_build_serves_every_problem_that_launches_it(monkeypatch, tmp_path):
    """A rung at two problem sizes launches the same kernel with the same argument types: the
    second report reuses the first build (one entry in the kernels' cache) and is the report a
    fresh build gives."""
    from perfkit.kernels import saxpy

    v = next(x for x in saxpy.LADDER if x.name == "naive")
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "a"))
    small = anatomy.inspect(v, saxpy.Problem(n=1000), cc=(9, 0))
    big = anatomy.inspect(v, saxpy.Problem(n=1 << 22), cc=(9, 0))
    assert len(list((tmp_path / "a" / "anatomy" / "kernels").glob("*.json"))) == 1
    assert len(list((tmp_path / "a" / "anatomy").glob("*.json"))) == 2  # one report per problem
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "b"))
    fresh = anatomy.inspect(v, saxpy.Problem(n=1 << 22), cc=(9, 0))
    assert big.sass == fresh.sass == small.sass and big.registers == fresh.registers
    assert big.grid == fresh.grid != small.grid  # the launch's own shape is not taken from the cache


def test_kernels_that_differ_in_a_baked_in_constant_are_built_apart(monkeypatch, tmp_path):
    """The multirow softmax kernel is made by a factory per launch shape (threads per row,
    rows per block, loads in flight): two shapes are two kernels, each built and kept."""
    from perfkit.kernels.norm import softmax

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path))
    p = softmax.Problem(rows=8, cols=256)
    base = next(x for x in softmax.LADDER if x.name == "multirow")
    a = anatomy.inspect(base, p, cc=(9, 0))
    b = anatomy.inspect(type(base)(**{**base.config, "threads_per_row": 16}), p, cc=(9, 0))
    assert len(list((tmp_path / "anatomy" / "kernels").glob("*.json"))) == 2
    assert a.sass != b.sass


def test_kernel_fingerprint_follows_code_closure_and_globals():
    def factory(k):
        def f(x):
            return x * k
        return f

    fp = anatomy._fingerprint
    assert fp(factory(2)) == fp(factory(2))
    assert fp(factory(2)) != fp(factory(3))  # a closure value
    assert fp(factory(2)) != fp(lambda x: x * 2)  # the code

    class Opaque:  # known only by its address: such a kernel is built every time
        pass

    thing = Opaque()

    def uses_opaque(x):
        return thing

    with pytest.raises(anatomy._Uncacheable):
        fp(uses_opaque)
    assert anatomy._kernel_cache_key(uses_opaque, (), {}, (9, 0, "a"), {"source": "s"}) is None


def test_kernel_fingerprint_tells_apart_same_named_helpers_and_module_constants():
    """A factory's helpers share one name: a kernel calling (s2, s3, s2) is not one calling
    (s2, s3, s3).  A module the kernel reads a constant from is fingerprinted by that
    constant (Numba freezes it into the code), and an object of unknown kind makes the
    kernel uncacheable rather than trusted by its repr."""
    import types

    def make_scale(k):
        def scale(x):
            return x * k
        return scale

    def make_kernel(f, g, h):
        def kern(a):
            return f(a) + g(a) + h(a)
        return kern

    s2, s3 = make_scale(2.0), make_scale(3.0)
    fp = anatomy._fingerprint
    assert fp(make_kernel(s2, s3, s2)) != fp(make_kernel(s2, s3, s3))
    assert fp(make_kernel(s2, s3, s2)) == fp(make_kernel(s2, s3, s2))

    knobs = types.ModuleType("knobs_for_test")
    knobs.SCALE = 2.0

    def make_reader():
        def reader(x):
            return x * knobs.SCALE
        return reader

    before = fp(make_reader())
    knobs.SCALE = 3.0
    assert fp(make_reader()) != before

    class Named:  # a repr with no address still hides its state
        def __repr__(self):
            return "Named()"

    obj = Named()

    def uses(x):
        return obj

    with pytest.raises(anatomy._Uncacheable):
        fp(uses)


def test_source_closure_follows_imports_inside_functions():
    """Convolution's im2col rung runs the GEMM ladder's kernel, imported inside a function: an
    edit to GEMM's rungs must miss the cached reports of conv's rungs too (gemm a package: the
    modules its ``__init__`` imports)."""
    files = [f.replace("\\", "/") for f in static.source_files("perfkit.kernels.conv")]
    assert any(f.endswith("perfkit/kernels/gemm/simt.py") for f in files)
    assert not any(f.endswith("perfkit/kernels/norm/softmax.py") for f in files)  # an unrelated ladder


def test_a_listing_is_classified_once_and_each_report_gets_its_own_mix():
    """The model inspects the same build once per problem it estimates (validate, a ladder's
    cards): the listing's instruction mix is computed once, equal to instruction_mix of the
    report's SASS, and each report holds its own copy (changing one changes no other)."""
    from perfkit.anatomy import report as report_mod
    from perfkit.kernels import saxpy

    report_mod._mix_once.cache_clear()
    v = saxpy.LADDER[2]
    a = anatomy.inspect(v, saxpy.Problem(n=4099))
    b = anatomy.inspect(v, saxpy.Problem(n=4099))
    assert a.mix == b.mix == anatomy.instruction_mix(a.sass) and a.mix
    assert report_mod._mix_once.cache_info().hits >= 1
    a.mix[next(iter(a.mix))] += 1000
    assert b.mix == anatomy.instruction_mix(b.sass) == report_mod._mix_of(b.sass)


def _nvdisasm(cubin: bytes) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([anatomy.tool_path("nvdisasm"), "-c", f.name],
                              capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("example", ["FMA_LOOP", "LOCAL"])
def test_nvdisasm_agrees_with_the_static_mix_and_the_loops(example):
    """The SASS the mix and the loops are read from (cuobjdump -sass) against a second NVIDIA
    disassembler of the same cubin, nvdisasm: the same instructions opcode by opcode (the mix's
    total, FFMA as 'fp32 fma', LDL/STL as 'local load/store'), and one loop for each branch back
    to an earlier address, the self-branch that pads the end of a kernel left out (audit of
    session 16: gemm 03/11/18/19/22, conv 14/15 and three norm rungs agreed the same way)."""
    from collections import Counter

    r = anatomy.inspect(*getattr(ex, example), (9, 0))
    nv = _nvdisasm(r.cubin)
    line = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")

    def opcodes(text):
        out = Counter()
        for m in line.finditer(text):
            ins = m.group(2).split(None, 1)[1] if m.group(2).startswith("@") else m.group(2)
            out[ins.split(None, 1)[0].split(".")[0]] += 1
        return out

    ours, theirs = opcodes(r.sass), opcodes(nv)
    assert ours == theirs
    assert r.instructions == sum(n for op, n in theirs.items() if op != "NOP")
    assert r.mix["fp32 fma"] == theirs["FFMA"]
    assert r.mix["local load/store"] == theirs["LDL"] + theirs["STL"]
    labels = {}
    for m in re.finditer(r"^(\.L_x_\d+):\s*$", nv, re.M):
        at = line.search(nv, m.end())
        if at:  # a label past the last instruction is no branch's target
            labels[m.group(1)] = int(at.group(1), 16)
    back = set()
    for m in line.finditer(nv):
        t = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", m.group(2))
        if t and labels[t.group(1)] < int(m.group(1), 16):
            back.add((labels[t.group(1)], int(m.group(1), 16)))
    assert {(lp.start, lp.end) for lp in r.loops} == back
    if example == "FMA_LOOP":
        assert back and theirs["FFMA"] > 0
    else:
        assert theirs["LDL"] + theirs["STL"] > 0
