
import pytest
import yaml

from perfkit import specs

REQUIRED = ["h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "l40s", "rtx-4090", "b200"]


def test_all_devices_load_with_sources():
    all_ = specs.load()
    assert set(REQUIRED) <= set(all_)
    for s in all_.values():
        for fld in ("sm_count", "fp32_flops", "dram_bw", "smem_per_sm_bytes", "registers_per_sm"):
            assert getattr(s, fld) > 0, (s.key, fld)
        assert s.tensor_flops and all(v >= s.fp32_flops for v in s.tensor_flops.values()), s.key
        assert all(u.startswith("http") for u in s.sources.values()), s.key


def test_spot_values_and_units():
    h = specs.get("h100-sxm")
    assert h.sm_count == 132 and h.compute_capability == (9, 0)
    assert h.dram_bw == pytest.approx(3.35e12) and h.l2_bytes == pytest.approx(50e6)
    assert h.fp32_flops == pytest.approx(66.9e12) and h.tensor_flops["fp16"] == pytest.approx(989.4e12)
    assert h.smem_per_sm_bytes == 228 * 1024 and h.smem_per_block_bytes == 227 * 1024
    a = specs.get("a100-sxm-80gb")
    assert a.dram_bw == pytest.approx(2039e9) and a.sm_count == 108 and "fp8" not in a.tensor_flops
    assert specs.get("h200").dram_bw == pytest.approx(4.8e12)
    assert specs.get("b200").l2_bytes is None  # unpublished, and says so


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("nvidia h100 pcie", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("L40S", "l40s"), ("NVIDIA B200", "b200"), ("H200", "h200"),
])
def test_lookup_by_driver_name(name, key):
    assert specs.get(name).key == key


def test_unknown_device_is_named():
    with pytest.raises(specs.SpecError, match="unknown device 'GTX 280'.*h100-sxm"):
        specs.get("GTX 280")


GOOD = yaml.safe_load(open(specs.DEFAULT_PATH).read())["devices"]["h100-sxm"]


def _write(tmp_path, doc):
    p = tmp_path / "devices.yaml"
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return p


def _with(**changes):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    for path, value in changes.items():
        fld, _, part = path.partition("__")
        if part:
            if value is None and part != "value":
                d[fld].pop(part)
            else:
                d[fld][part] = value
        else:
            d[fld] = value
    return {"schema": 1, "devices": {"x1": d}}


@pytest.mark.parametrize("doc, msg", [
    (_with(fp32__source=None), r"x1\.fp32: missing source"),
    (_with(fp32__unit=None), r"x1\.fp32: missing unit"),
    (_with(fp32__unit="furlongs"), r"x1\.fp32: unit 'furlongs' is not a rate unit"),
    (_with(memory_bandwidth__unit="MHz"), r"x1\.memory_bandwidth: unit 'MHz' is not a bandwidth unit"),
    (_with(sm_count__value="many"), r"x1\.sm_count: value must be a positive number"),
    (_with(fp32__source="see datasheet"), r"x1\.fp32: source must be an http"),
    (_with(sm_count__value=None), r"x1\.sm_count: value is null"),
    (_with(l2_size={"value": None, "unit": "MB", "source": "https://x.org"}), r"x1\.l2_size: value is null.*needs a note"),
    (_with(fp32=3), r"x1\.fp32: expected a mapping"),
    (_with(compute_capability="nine"), r"x1\.compute_capability"),
    ({"devices": {}}, "schema: 1"),
    ({"schema": 1, "devices": {"x1": "gpu"}}, "x1: expected a mapping"),
    ("- just\n- a list\n", "mapping at the top level"),
    ("schema: 1\ndevices: {x1: [unclosed\n", "invalid YAML"),
])
def test_malformed_files_name_device_and_field(tmp_path, doc, msg):
    with pytest.raises(specs.SpecError, match=msg):
        specs.load(_write(tmp_path, doc))


def test_missing_field(tmp_path):
    doc = _with()
    del doc["devices"]["x1"]["registers_per_sm"]
    with pytest.raises(specs.SpecError, match=r"x1\.registers_per_sm: missing"):
        specs.load(_write(tmp_path, doc))


def test_missing_file(tmp_path):
    with pytest.raises(specs.SpecError, match="cannot read"):
        specs.load(tmp_path / "nope.yaml")


def test_a_directory_or_non_utf8_file_is_a_spec_error(tmp_path):
    with pytest.raises(specs.SpecError, match="cannot read"):
        specs.load(tmp_path)
    bad = tmp_path / "devices.yaml"
    bad.write_bytes(b"\xff\xfe schema: 1")
    with pytest.raises(specs.SpecError, match="not UTF-8"):
        specs.load(bad)
