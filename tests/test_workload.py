"""perfkit.workload: traced ops on the meta device, FLOPs against published figures, bytes
against hand counts, classes, predictions, the CLI and its CSV, the GPU-only profile path."""
from __future__ import annotations

import math
import time

import pandas as pd
import pytest
import torch
from torch import nn

import perfkit  # noqa: F401  (chooses the backend first)
from perfkit import specs, workload
from perfkit.workload import networks, ops as wops

F32 = 4


def _kernels(records):
    return [r for r in records if r.cls != "view"]


def _one(records, op):
    found = [r for r in records if r.op == op]
    assert len(found) == 1, [r.op for r in records]
    return found[0]


def _meta(module, *shape):
    with torch.device("meta"):
        m = module()
        x = torch.randn(*shape)
    return m, x


# --- networks: parameters and FLOPs against published figures --------------------------------
@pytest.mark.parametrize("name", ["resnet50", "bert-base", "gpt2"])
def test_parameter_counts_match_published(name):
    spec = networks.resolve(name)
    with torch.device("meta"):
        model = spec.build()
    assert workload.count_params(model) == networks.PARAMS[name]


def test_published_parameter_counts():
    # torchvision's table; BERT-base with embeddings and pooler; GPT-2 small with tied LM head
    assert networks.PARAMS == {"resnet50": 25_557_032, "bert-base": 109_482_240, "gpt2": 124_439_808}


@pytest.mark.parametrize("name,batch,seq", [("resnet50", 2, None), ("bert-base", 2, 128), ("bert-base", 1, 512),
                                            ("gpt2", 1, 1024)])
def test_forward_flops_within_2_percent_of_published(name, batch, seq):
    t0 = time.perf_counter()
    w = workload.characterize(name, batch=batch, seq=seq, mode="infer")
    assert time.perf_counter() - t0 < 30
    pub = workload.published_flops(name, batch=batch, seq=seq)["flops"]
    assert abs(w.matmul_flops() / pub - 1) < 0.02, (w.matmul_flops(), pub)
    if name == "resnet50":  # 4.1 GMAC = 8.2 GFLOP per image, independent of our formula code
        assert abs(w.matmul_flops() / batch / 8.2e9 - 1) < 0.02
    if name == "gpt2":  # 2 * params * tokens + 4 * L * S * d * tokens, written out here
        assert abs(w.matmul_flops() / (2 * 124_439_808 * 1024 + 4 * 12 * 1024 * 768 * 1024) - 1) < 0.02


def test_training_step_has_backward_with_twice_the_matmul_flops():
    w = workload.characterize("resnet50", batch=2, mode="train")
    fwd = sum(r.flops for r in w.records if r.phase == "forward" and r.cls in ("conv", "gemm"))
    bwd = sum(r.flops for r in w.records if r.phase == "backward" and r.cls in ("conv", "gemm"))
    # dgrad + wgrad = 2x forward, less the stem's dgrad (the image needs no gradient)
    assert 1.95 < bwd / fwd <= 2.0
    assert any(r.op == "aten.native_batch_norm_backward" for r in w.records)
    # no optimizer step, no gradient copies: autograd steals each gradient as in a real step
    assert not any(r.op == "aten.copy_" for r in w.records if r.phase == "backward")


def test_each_network_traced_quickly_in_training():
    for name, seq in (("resnet50", None), ("bert-base", 128), ("gpt2", 1024)):
        w = workload.characterize(name, batch=2, seq=seq, mode="train")
        assert w.trace_s < 30, (name, w.trace_s)
        classes = {r.cls for r in w.records}
        assert {"gemm", "elementwise", "normalization"} <= classes
        if name != "resnet50":
            assert "softmax" in classes and "data movement" in classes


@pytest.mark.parametrize("dtype,kernel", [("bfloat16", "flash"), ("float32", "efficient")])
def test_sdpa_attention_is_one_fused_kernel(dtype, kernel):
    s, L, h, dh = 64, 12, 12, 64
    w = workload.characterize("bert-base", batch=1, seq=s, mode="train", dtype=dtype, attention="sdpa")
    att = [r for r in w.records if r.cls == "attention"]
    fwd = [r for r in att if r.phase == "forward"]
    assert len(fwd) == L and len(att) == 2 * L
    assert all(kernel in r.op for r in att)
    assert sum(r.flops for r in fwd) == L * 4 * h * s * s * dh  # QK^T and AV, full S x S
    assert not any(r.cls == "softmax" for r in w.records)  # the softmax lives inside the fused kernel
    eager = workload.characterize("bert-base", batch=1, seq=s, mode="infer", dtype=dtype)
    fused = workload.characterize("bert-base", batch=1, seq=s, mode="infer", dtype=dtype, attention="sdpa")
    assert fused.matmul_flops() == pytest.approx(eager.matmul_flops())  # the same work, fewer kernels
    assert len(_kernels(fused.records)) < len(_kernels(eager.records))
    with pytest.raises(workload.WorkloadError, match="no attention"):
        workload.characterize("resnet50", batch=1, attention="sdpa")


# --- bytes and FLOPs of small layers, by hand ------------------------------------------------
def test_linear_bytes_flops_problem_by_hand():
    m, x = _meta(lambda: nn.Linear(5, 3), 4, 5)
    recs = workload.trace(m, x)
    r = _one(recs, "aten.addmm")
    assert r.cls == "gemm"
    assert r.flops == 2 * 4 * 3 * 5
    assert r.bytes == (3 + 4 * 5 + 5 * 3 + 4 * 3) * F32  # bias, x, W (a transposed view), y
    assert r.problem_label() == "gemm.Problem(m=4, n=3, k=5, dtype='float32')"
    assert _one(recs, "aten.t").cls == "view" and _one(recs, "aten.t").bytes == 0


def test_conv2d_bytes_flops_by_hand():
    m, x = _meta(lambda: nn.Conv2d(3, 4, 3, padding=1, bias=False), 2, 3, 8, 7)
    r = _one(workload.trace(m, x), "aten.convolution")
    assert r.cls == "conv"
    assert r.flops == 2 * 2 * 4 * 8 * 7 * 3 * 3 * 3
    assert r.bytes == (2 * 3 * 8 * 7 + 4 * 3 * 3 * 3 + 2 * 4 * 8 * 7) * F32
    assert r.problem == ("conv", (("n", 2), ("c", 3), ("h", 8), ("w", 7), ("k", 4), ("r", 3), ("s", 3),
                                  ("stride", 1), ("pad", 1), ("dtype", "float32"), ("layout", "NCHW")), 1)


def test_layernorm_bytes_flops_problem_by_hand():
    m, x = _meta(lambda: nn.LayerNorm(16), 6, 16)
    r = _one(workload.trace(m, x), "aten.native_layer_norm")
    assert r.cls == "normalization"
    assert r.flops == 8 * 6 * 16  # as norm.layernorm.Problem counts them
    # x, gamma, beta read; y, mean (6, 1) and rstd (6, 1) written
    assert r.bytes == (6 * 16 + 16 + 16 + 6 * 16 + 6 + 6) * F32
    assert r.problem_label() == "norm.layernorm.Problem(rows=6, cols=16, dtype='float32', eps=1e-05)"


def test_layernorm_flops_match_the_ladder_problem():
    from perfkit.kernels.norm import layernorm, softmax

    m, x = _meta(lambda: nn.LayerNorm(33), 7, 33)
    r = _one(workload.trace(m, x), "aten.native_layer_norm")
    mod, fields, _ = r.problem
    assert r.flops == layernorm.Problem(**dict(fields)).flops
    with torch.device("meta"):
        y = torch.randn(5, 9)
    rec = wops.Recorder()
    with rec:
        torch.softmax(y, -1)
    s = _one(rec.records, "aten._softmax")
    assert s.cls == "softmax" and s.flops == softmax.Problem(5, 9).flops and s.bytes == 2 * 5 * 9 * F32


def test_broadcast_operand_counts_its_distinct_elements_and_half_dtypes():
    with torch.device("meta"):
        a = torch.randn(64, 32, dtype=torch.bfloat16)
        b = torch.randn(32, dtype=torch.bfloat16)
    rec = wops.Recorder()
    with rec:
        a + b.expand(64, 32)
        a.sum(0)
        a.t().contiguous()
    add = _one(rec.records, "aten.add")
    assert add.bytes == (64 * 32 + 32 + 64 * 32) * 2 and add.cls == "elementwise" and add.flops == 64 * 32
    red = _one(rec.records, "aten.sum")
    assert red.cls == "reduction" and red.bytes == (64 * 32 + 32) * 2 and red.flops == 64 * 32
    cl = _one(rec.records, "aten.clone")
    assert cl.cls == "data movement" and cl.bytes == 2 * 64 * 32 * 2 and cl.flops == 0
    assert all(r.bytes == 0 for r in rec.records if r.cls == "view")


def test_classify_names():
    c = wops.classify
    assert c("mm") == c("bmm") == c("addmm") == "gemm"
    assert c("convolution_backward") == "conv"
    assert c("_scaled_dot_product_flash_attention") == "attention"
    assert c("native_batch_norm_backward") == c("native_layer_norm") == "normalization"
    assert c("_softmax") == c("_log_softmax_backward_data") == "softmax"
    assert c("relu") == c("gelu_backward", 10, 10) == "elementwise"
    assert c("sum") == c("max_pool2d_with_indices") == "reduction"
    assert c("cat") == c("embedding") == c("clone") == "data movement"
    assert c("view") == c("detach") == c("empty") == "view"
    assert c("something_new", 100, 1) == "reduction" and c("something_new", 4, 4) == "elementwise"


def test_trace_refuses_tensors_off_meta_and_bad_arguments():
    with pytest.raises(workload.WorkloadError, match="meta device"):
        workload.trace(nn.Linear(2, 2), torch.randn(1, 2))
    m, x = _meta(lambda: nn.Linear(2, 2), 1, 2)
    with pytest.raises(workload.WorkloadError, match="mode"):
        workload.trace(m, x, mode="fit")
    with pytest.raises(workload.WorkloadError, match="loss_fn"):
        workload.trace(m, x, mode="train")
    with pytest.raises(workload.WorkloadError, match="seq"):
        workload.characterize("gpt2", batch=1, seq=2048)
    with pytest.raises(workload.WorkloadError, match="images"):
        workload.characterize("resnet50", batch=1, seq=128)
    with pytest.raises(workload.WorkloadError, match="batch"):
        workload.characterize("resnet50", batch=0)
    with pytest.raises(ValueError, match="unknown network"):
        workload.characterize("vgg16")


# --- predictions -------------------------------------------------------------------------------
def test_roofline_prediction_by_hand_and_amdahl():
    m, x = _meta(lambda: nn.Linear(512, 256), 128, 512)
    recs = workload.trace(m, x)
    h = specs.get("h100-sxm")
    df = workload.predict(recs, "h100-sxm", ladders=False)
    row = df[df["op"] == "aten.addmm"].iloc[0]
    flops, nbytes = 2 * 128 * 256 * 512, (256 + 128 * 512 + 512 * 256 + 128 * 256) * F32
    assert row["roofline_s"] == pytest.approx(max(flops / h.fp32_flops, nbytes / h.dram_bw, workload.KERNEL_FLOOR_S))
    assert row["method"] == "roofline"
    # bfloat16 runs on the tensor cores
    with torch.device("meta"):
        m16, x16 = nn.Linear(512, 256).to(torch.bfloat16), torch.randn(128, 512, dtype=torch.bfloat16)
    row16 = workload.predict(workload.trace(m16, x16), "h100-sxm", ladders=False)
    row16 = row16[row16["op"] == "aten.addmm"].iloc[0]
    assert row16["roofline_s"] == pytest.approx(max(flops / h.tensor_flops["bf16"], nbytes / 2 / h.dram_bw,
                                                    workload.KERNEL_FLOOR_S))
    assert row16["bound"] in ("tensor bf16", "dram", "floor")
    assert workload.amdahl(0.5, 2) == pytest.approx(1 / 0.75)
    assert workload.amdahl(0.0) == 1.0


def test_by_class_table_sums_and_links():
    w = workload.characterize("bert-base", batch=1, seq=64, mode="train")
    ops_df = w.predict("a100-sxm-80gb", ladders=False)
    t = workload.by_class(ops_df)
    assert list(t.columns[:5]) == ["class", "ops", "GFLOP", "GB", "predicted_ms"]
    assert t["share"].sum() == pytest.approx(1.0) and t["flop_share"].sum() == pytest.approx(1.0)
    assert t["predicted_ms"].sum() == pytest.approx(ops_df["predicted_s"].sum() * 1e3)
    assert t["ops"].sum() == (ops_df["class"] != "view").sum()
    assert set(t["class"]) <= set(workload.CLASSES) - {"view"}
    assert (t["notebook"] != "").all()
    for _, r in t.iterrows():
        assert r["step_speedup_2x"] == pytest.approx(1 / (1 - r["share"] / 2))
    # normalization + softmax: a small share of the FLOPs, a much larger share of the time
    small = t[t["class"].isin(["normalization", "softmax", "elementwise"])]
    assert small["flop_share"].sum() < 0.01 < small["share"].sum()
    what_if = workload.compare_devices(w, ["h100-sxm", "l40s"], ladders=False)
    assert list(what_if.columns) == ["h100-sxm", "l40s"] and "total" in what_if.index


def test_ladder_estimate_used_where_a_problem_stands_and_cached(monkeypatch):
    from perfkit import model

    calls = []

    class Est:
        def __init__(self, s):
            self.seconds, self.bound, self.legs, self.inputs = s, "dram", {"dram": s}, {}

    def fake_estimate(variant, problem, gpu, banks=True):
        assert banks is False  # no simulated run of the kernel to count bank conflicts
        calls.append((variant.rung, problem, gpu))
        return Est(1e-3 / (1 + variant.rung))  # the highest rung is "best" here

    monkeypatch.setattr(model, "estimate", fake_estimate, raising=False)
    monkeypatch.setattr(workload, "_LADDER_CACHE", {})
    with torch.device("meta"):
        m, x = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)), torch.randn(3, 8)
    df = workload.predict(workload.trace(m, x), "h100-sxm", ladders="best")
    mm = df[df["op"] == "aten.addmm"]
    assert len(mm) == 2 and mm["method"].str.startswith("estimate").all()
    n_rungs = len(calls)
    assert n_rungs >= 1 and all(c[2] == "h100-sxm" for c in calls)
    best = min(1e-3 / (1 + c[0]) for c in calls)
    assert mm["predicted_s"].tolist() == [best, best]
    workload.predict(workload.trace(m, x), "h100-sxm", ladders="best")
    assert len(calls) == n_rungs  # the same problem twice: estimated once (cache)
    top = workload.predict(workload.trace(m, x), "h100-sxm", ladders="top")
    assert len(calls) == n_rungs + 1 and calls[-1][0] == max(c[0] for c in calls)  # the top rung alone
    assert top.loc[top["op"] == "aten.addmm", "method"].str.startswith("estimate").all()
    off = workload.predict(workload.trace(m, x), "h100-sxm")
    assert (off.loc[off["op"] != "aten.t", "method"] == "roofline").all() and len(calls) == n_rungs + 1
    with pytest.raises(workload.WorkloadError, match="ladders"):
        workload.predict(workload.trace(m, x), "h100-sxm", ladders="all")
    assert (mm["roofline_s"] > 0).all()


# --- the CLI -----------------------------------------------------------------------------------
def test_cli_resnet50_train_table_and_csv(tmp_path, capsys):
    from perfkit import cli

    out = tmp_path / "r50.csv"
    rc = cli.main(["workload", "resnet50", "--mode", "train", "--gpu", "h100-sxm", "--batch", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "resnet50 batch 2 train float32" in text and "H100" in text
    for word in ("class", "ops", "GFLOP", "GB", "predicted_ms", "share", "conv", "normalization", "total", "Amdahl"):
        assert word in text
    df = pd.read_csv(out)
    assert {"op", "class", "flops", "bytes", "problem", "predicted_s", "roofline_s", "method"} <= set(df.columns)
    assert (df["phase"] == "backward").any() and (df["class"] == "conv").sum() == 2 * 53
    assert math.isclose(df.loc[df["class"] == "conv", "flops"].sum(), 3 * 2 * 8.18e9, rel_tol=0.03)


def test_cli_errors_name_the_problem(capsys):
    from perfkit import cli

    assert cli.main(["workload", "alexnet"]) == 2
    assert "unknown network" in capsys.readouterr().err
    assert cli.main(["workload", "gpt2", "--gpu", "tpu-v9", "--seq", "8", "--batch", "1"]) == 2
    assert "unknown device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["workload", "gpt2", "--mode", "fit"])


# --- measured: GPU only --------------------------------------------------------------------------
def test_profile_needs_a_gpu_and_says_why(capsys):
    from perfkit import backend, results
    from perfkit.workload import measure

    reason = measure.unavailable()
    if reason is None:
        pytest.skip("a GPU is present: the profile path runs for real in notebook 05's gpu profile")
    assert backend.is_simulator() or not torch.cuda.is_available()
    before = sorted(results.RESULTS_DIR.rglob("*"))
    with pytest.raises(workload.WorkloadError, match="cannot profile"):
        measure.profile("bert-base", batch=1, seq=8)
    from perfkit import cli

    assert cli.main(["workload", "bert-base", "--batch", "1", "--seq", "8", "--measure"]) == 3
    assert "--measure skipped" in capsys.readouterr().err
    assert sorted(results.RESULTS_DIR.rglob("*")) == before


def test_resnet50_sweep_reads_the_best_checked_rung_and_weights_by_count():
    """Made-up records (no measurement): a faster rung that failed its check is ignored, the
    latest record of a rung stands for it, a layer without cuDNN is listed as missing, and the
    fraction is sum(count * cuDNN) / sum(count * best) over the layers with both."""
    from perfkit.kernels import conv
    from perfkit.workload.conv_sweep import resnet50_sweep

    layers = conv.resnet50_layers(32, "float16", "NHWC")
    (n0, p0, c0), (n1, p1, c1), (n2, p2, _) = layers[0], layers[2], layers[4]
    rows = [  # (problem, rung, label, median_s, check_ok, utc)
        (p0.label, 0, "00 oracle", 10e-6, True, "1"), (p0.label, 9, "09 tc_vector", 40e-6, True, "1"),
        (p0.label, 10, "10 tc_ldmatrix", 1e-6, False, "1"),  # wrong answers: never the best
        (p1.label, 0, "00 oracle", 20e-6, True, "1"), (p1.label, 9, "09 tc_vector", 90e-6, True, "1"),
        (p1.label, 9, "09 tc_vector", 25e-6, True, "2"),  # the latest record of the rung
        (p2.label, 9, "09 tc_vector", 5e-6, True, "1"),  # no cuDNN record
    ]
    df = pd.DataFrame(rows, columns=["problem", "rung", "label", "median_s", "check_ok", "utc"])
    df["variant"] = df["label"].str[3:]
    df["gpu"] = "G"
    rep = resnet50_sweep(df, gpu="G")
    t = rep.table.set_index("layer")
    assert t.loc[n0, "best_rung"] == "09 tc_vector" and t.loc[n0, "best_us"] == pytest.approx(40)
    assert t.loc[n1, "best_us"] == pytest.approx(25) and t.loc[n1, "x_cudnn"] == pytest.approx(0.8)
    assert rep.fraction == pytest.approx((c0 * 10 + c1 * 20) / (c0 * 40 + c1 * 25))
    assert layers[4][0] in rep.missing and len(rep.missing) == len(layers) - 2
    assert len(rep.table) == 23 and rep.table["count"].sum() == 53
    empty = resnet50_sweep()
    assert empty.fraction is None and empty.table["best_us"].isna().all() and len(empty.missing) == 23
    assert resnet50_sweep(df, gpu="other").fraction is None


def test_predicted_sweep_takes_the_smallest_estimate_among_the_rungs_that_take_a_layer():
    """The model's sweep before records: at the stem (3 channels) the 16-byte tensor-core rung
    refuses and the smaller estimate of the two rungs that take it wins; a layer no rung of the
    ladder takes is missing; cuDNN is the model's library line; the fraction is weighted by count,
    from the same estimates."""
    from perfkit import model
    from perfkit.kernels import conv
    from perfkit.workload.conv_sweep import predicted_sweep

    ladder = [conv.Oracle(), conv.IgemmRegblock(), conv.TensorCore(), conv.TCEpilogue()]
    ps = {n: (p, c) for n, p, c in conv.resnet50_layers(32, "float16", "NHWC")}
    stem = "conv1 7x7/2"
    rep = predicted_sweep("h200", ladder=ladder, layers=[stem], banks=False)  # no simulated twins: seconds
    t = rep.table.set_index("layer")
    assert list(t.index) == [stem] and rep.predicted and not rep.missing
    est = {v.label: model.estimate(v, ps[stem][0], "h200", banks=False).seconds for v in ladder[1:3]}
    assert t.loc[stem, "best_rung"] == min(est, key=est.get)
    assert t.loc[stem, "best_us"] == pytest.approx(min(est.values()) * 1e6)
    lib = model.estimate(ladder[0], ps[stem][0], "h200", banks=False).seconds * 1e6
    assert t.loc[stem, "cudnn_us"] == pytest.approx(lib)
    assert rep.fraction == pytest.approx(lib / t.loc[stem, "best_us"])
    assert "predicted by the model" in str(rep) and f"{rep.fraction:.2f}" in str(rep)
    only_tc = predicted_sweep("h200", ladder=[conv.Oracle(), conv.TCEpilogue()], layers=[stem], banks=False)
    assert only_tc.missing == [stem] and only_tc.fraction is None and "no rung takes" in str(only_tc)


def test_resnet50_sweep_says_what_is_unserved_and_why_from_the_rungs_own_refusals():
    """Made-up records (no measurement) at one layer: the sentences give the measured share and
    fraction, the layers without records, and each rung's refusal in its own supports() words
    (checked here against supports() itself), rungs refusing alike said once; the figure has one
    panel per report with one bar per layer."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    from perfkit.kernels import conv
    from perfkit.kernels.base import UnsupportedProblem
    from perfkit.workload.conv_sweep import refusals, resnet50_sweep, sweep_figure

    layers = conv.resnet50_layers(32, "float16", "NHWC")
    name, p, count = next(x for x in layers if x[1].r == 3 and x[1].stride == 1)
    df = pd.DataFrame([(p.label, 0, "00 oracle", 20e-6, True, "1"), (p.label, 9, "09 tc_vector", 50e-6, True, "1")],
                      columns=["problem", "rung", "label", "median_s", "check_ok", "utc"])
    df["variant"], df["gpu"] = df["label"].str[3:], "G"
    rep = resnet50_sweep(df, gpu="G")
    assert list(rep.measured()["layer"]) == [name]
    ref = refusals("float16", "NHWC")
    for _, r in ref.iterrows():  # each reason is the rung's own refusal at that layer
        v = next(v for v in conv.LADDER if v.name == r["rung"])
        lp = next(lp for n, lp, _ in layers if n == r["layer"])
        with pytest.raises(UnsupportedProblem, match=re.escape(r["reason"])):
            v.supports(lp)
    served = {(r["rung"], r["layer"]) for _, r in ref.iterrows()}
    for v in conv.LADDER[1:]:  # every pair not listed is taken
        for n, lp, _ in layers:
            if (v.name, n) not in served:
                v.supports(lp)
    text = " ".join(rep.sentences())
    assert "of cuDNN" not in rep.sentences()[0] and "cover 1 of the 23" in rep.sentences()[0]  # shown before a prompt
    share = count * p.flops / sum(c * lp.flops for _, lp, c in layers)
    assert f"cover 1 of the 23 distinct layers ({count} of the 53 conv layers, {share:.0%}" in text
    assert "reaches 0.40 of cuDNN" in text and "not for the network" in text
    assert f"22 layers ({53 - count} conv layers" in text and "have no record on G yet" in text
    stem = next(n for n, lp, _ in layers if lp.c % 8)
    assert f"c=3 is not a multiple of 8" in text and stem in text
    # the two F(2x2) rungs refuse alike: said once; F(4x4) refuses in its own words (naming the rung to use)
    assert text.count("F(2x2, 3x3) takes 3x3 filters at stride 1") == 1 and "07 winograd, 11 winograd_tiled refuse" in text
    assert "14 winograd_f4 refuses 19 of the 23 layers" in text and "use igemm_regblock (rung 6)" in text
    f32 = " ".join(resnet50_sweep(df, gpu="G", dtype="float32", layout="NCHW").sentences())
    assert "no layer has a record of both" in f32 and "refuse every layer at float32 NCHW: takes float16" in f32
    fig = sweep_figure([rep, resnet50_sweep(None, dtype="float32", layout="NCHW")])
    assert len(fig.axes) == 2 and all(len(ax.patches) == 23 for ax in fig.axes)
    assert any("0.40 of cuDNN" in t.get_text() for t in fig.axes[0].texts) and not fig.axes[1].texts


class _Litter:
    """A reference cycle whose finalizer touches a tensor: garbage only the cycle collector frees,
    at a moment that depends on everything the process allocated before."""

    def __init__(self, t):
        self.me, self.t = self, t

    def __del__(self):
        self.t.detach()


class _LitteringMLP(nn.Module):
    def __init__(self, litter: bool):
        super().__init__()
        self.a, self.b, self.litter = nn.Linear(4, 8), nn.Linear(8, 2), litter

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.litter:
            for _ in range(20):
                _Litter(h)
        return self.b(h)


def test_trace_holds_the_step_ops_whenever_garbage_is_collected():
    """A collection of cyclic garbage while a step is traced runs its finalizers on the tracing
    thread, under the recorder: a finalizer's tensor op (here a detach, as the stray
    ``aten.detach`` row seen in 2 of about 6 full test runs, never in a fresh process) would
    be recorded as an op of the step, and every index after it would move.  The trace collects
    before it starts and not during the step, so the ops are the step's whatever the collector's
    timing."""
    import gc

    thresholds = gc.get_threshold()

    def ops(litter):
        with torch.device("meta"):
            torch.manual_seed(0)
            m, x = _LitteringMLP(litter), torch.randn(3, 4)
        return [(r.op, r.phase) for r in workload.trace(m, x, mode="train", loss_fn=lambda y: y.sum())]

    clean = ops(False)
    try:
        gc.set_threshold(1, 1, 1)  # a collection at nearly every allocation
        littered = ops(True)
    finally:
        gc.set_threshold(*thresholds)
    assert littered == clean, [op for op in littered if op not in clean or littered.count(op) != clean.count(op)][:3]
    assert gc.isenabled()
