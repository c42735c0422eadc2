"""The hardware catalogue and the analytic model profile (no hardware needed)."""

from __future__ import annotations

import pytest

from autoplan.errors import InputError
from autoplan.models.shapes import BUILTIN_SHAPES, forward_flops_per_sample
from autoplan.profile.analytic import analytic_model_profile
from autoplan.profile.formats import COLLECTIVE_OPS, ClusterProfile, ModelProfile
from autoplan.profile.hardware import SYSTEMS, catalogue_cluster, parse_cluster_spec, with_assumptions


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_catalogue_entries(name):
    c = catalogue_cluster(f"{name}:4")
    assert (c.num_nodes, c.devices_per_node, c.world_size, c.source) == (4, 8, 32, "catalogue")
    assert set(c.links) == {"intra_node", "inter_node"}
    for cls in c.links:
        assert set(c.links[cls]) == set(COLLECTIVE_OPS)
    assert sorted(c.links["intra_node"]["all_reduce"]) == [2, 4, 8]
    assert sorted(c.links["inter_node"]["all_reduce"]) == [2, 4, 8, 16, 32]
    n = 256 * 2 ** 20
    # a collective across nodes is slower than the same one inside a node
    assert c.collective_time_s("all_reduce", n, 8, True) > c.collective_time_s("all_reduce", n, 8, False)
    assert all(c.sources.values()) and "datasheet" in c.sources["device.memory_bytes"]
    assert ClusterProfile.from_dict(c.to_dict()).to_dict() == c.to_dict()


def test_catalogue_figures_follow_the_datasheets():
    a100 = catalogue_cluster("dgx-a100-80gb:1")
    # the measured large-GEMM rate (Maximum Achievable Matmul FLOPS: 271.2 of 312 TFLOP/s)
    assert a100.device.compute_flops_per_s == pytest.approx(271.2e12)
    assert a100.device.memory_bytes == 80 * 10 ** 9
    assert "inter_node" not in a100.links
    # 8 GPUs, large message: bus bandwidth equals the measured 235 GB/s
    fit = a100.links["intra_node"]["all_reduce"][8]
    assert fit.bandwidth_bytes_per_s * 2 * 7 / 8 == pytest.approx(235e9)
    slow = catalogue_cluster("dgx-a100-80gb:2", with_assumptions(matmul_efficiency=0.5))
    assert slow.device.compute_flops_per_s == pytest.approx(156e12)
    # inter-node: 8 x 25 GB/s HDR per node / 8 GPUs x 0.7
    assert slow.links["inter_node"]["send_recv"][2].bandwidth_bytes_per_s == pytest.approx(17.5e9)


@pytest.mark.parametrize("spec", ["dgx-b200:2", "dgx-a100-80gb:", "dgx-a100-80gb:0", "dgx-a100-80gb:two",
                                  "dgx-a100-80gb:-1", ""])
def test_catalogue_rejects_junk(spec):
    with pytest.raises(InputError):
        catalogue_cluster(spec)


def test_catalogue_names_known_entries_and_bare_name_is_one_node():
    with pytest.raises(InputError, match="dgx-h100-80gb"):
        parse_cluster_spec("tpu-v5:4")
    assert parse_cluster_spec("dgx-h200-141gb")[1] == 1
    with pytest.raises(InputError, match="unknown catalogue assumption"):
        with_assumptions(warp_drive=2.0)


def test_analytic_gpt3_175b():
    shape = BUILTIN_SHAPES["gpt3-175b"]
    cluster = catalogue_cluster("dgx-a100-80gb:128")
    prof = analytic_model_profile(shape, cluster, stack="megatron-lm-2022")   # Korthikanti's activations
    assert prof.source == "analytic" and prof.precision == "bf16"
    assert prof.total_params() == pytest.approx(175e9, rel=0.02)
    s, h, a = shape.seq_len, shape.hidden, shape.heads
    assert forward_flops_per_sample("block", shape, s) == pytest.approx(24 * s * h * h * (1 + s / (6 * h)))
    block = prof.kinds["block"]
    t1 = block.timing(1, 1)
    assert t1.saved_activation_bytes == pytest.approx(s * h * (34 + 5 * a * s / h), rel=1e-6)
    t8 = block.timing(1, 8)
    assert t8.saved_activation_bytes == pytest.approx(s * h * (10 + 24 / 8 + 5 * a * s / (h * 8)), rel=1e-6)
    # a TP shard runs its smaller GEMMs less efficiently: slower than 1/8 of the whole block
    assert t1.forward_s / 8 < t8.forward_s < t1.forward_s / 6
    assert 1.9 * t1.forward_s < t1.backward_s < 2.3 * t1.forward_s
    # 24*s*h^2*(1+s/6h) FLOPs, about 271 TFLOP/s for the GEMMs, flash attention, elementwise bytes,
    # at the A100's sustained fraction: 25-50 ms per block per sequence
    assert 0.025 < t1.forward_s < 0.05
    assert t1.output_bytes == s * h * 2
    assert block.param_bytes == 2 * block.param_count
    assert prof.optimizer_step_s_per_param > 0
    assert ModelProfile.from_dict(prof.to_dict()).to_dict() == prof.to_dict()


def test_analytic_precision_and_tp_filter():
    shape = BUILTIN_SHAPES["llama3-8b"]          # 8 KV heads: TP 16 does not divide them
    cluster = catalogue_cluster("dgx-h100-80gb:1")
    bf16 = analytic_model_profile(shape, cluster, tp_list=(1, 2, 8, 16), mbs_list=(1, 2))
    assert sorted({t.tp for t in bf16.kinds["block"].timings}) == [1, 2, 8]
    fp32 = analytic_model_profile(shape, cluster, precision="fp32", tp_list=(1,), mbs_list=(1,))
    assert fp32.kinds["block"].timing(1, 1).saved_activation_bytes == \
        2 * bf16.kinds["block"].timing(1, 1).saved_activation_bytes
    with pytest.raises(InputError, match="precision"):
        analytic_model_profile(shape, cluster, precision="int4")


def test_a_measured_gpu_is_the_catalogue_chip_torch_names():
    """A measured cluster profile records torch's name for its GPU ("NVIDIA H200" on the H200 lent
    2026-12-04): the analytic model takes it as the catalogue chip (SM count, fp8 rate), where before
    it fell back to the flat model and refused fp8 on an H200."""
    from autoplan.profile.analytic import DeviceModel
    from autoplan.profile.hardware import H100_SXM5_80GB, H200_SXM_141GB, accelerator_of
    assert accelerator_of("NVIDIA H200") is H200_SXM_141GB
    assert accelerator_of("NVIDIA H100 80GB HBM3") is H100_SXM5_80GB
    assert accelerator_of("NVIDIA H100 PCIe") is None and accelerator_of("cpu") is None
    cl = catalogue_cluster("dgx-h200-141gb:1")
    cl.device.name = "NVIDIA H200"
    dm = DeviceModel.of(cl, "bf16")
    assert dm.sm_count == H200_SXM_141GB.sm_count
    assert dm.fp8().peak_flops_per_s == H200_SXM_141GB.peak_fp8_matmul_flops_per_s
