"""Collective measurement: the pure alpha-beta fit against brute force, group planning, parse_bytes,
and a real two-process gloo run."""

from __future__ import annotations

import itertools
import math

import pytest

from autoplan.errors import AutoplanError, InputError
from autoplan.profile.formats import COLLECTIVE_OPS, ClusterProfile
from autoplan.profile.fit import MAX_BANDWIDTH_BYTES_PER_S, fit_alpha_beta
from autoplan.profile.link_bench import default_group_sizes, plan_link_groups
from autoplan.profile.links import parse_bytes, profile_cluster

SIZES = [4096 * 2 ** i for i in range(12)]


def rel_sq_error(a: float, bw: float, ns, ts) -> float:
    return sum(((a + n / bw - t) / t) ** 2 for n, t in zip(ns, ts))


def test_fit_recovers_exact_alpha_beta():
    a, bw = 25e-6, 3.5e9
    fit = fit_alpha_beta(SIZES, [a + n / bw for n in SIZES])
    assert fit.latency_s == pytest.approx(a, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(bw, rel=1e-9)
    assert fit.residual_rel < 1e-9


@pytest.mark.parametrize("a,bw,noise", [(25e-6, 3.5e9, 0.15), (2e-6, 4e11, 0.3), (1e-3, 1e8, 0.05)])
def test_fit_matches_brute_force_grid(a, bw, noise):
    # deterministic multiplicative noise
    ts = [(a + n / bw) * (1 + noise * math.sin(1.7 * i + 0.3)) for i, n in enumerate(SIZES)]
    fit = fit_alpha_beta(SIZES, ts)
    grid_a = [a * 2 * i / 200 for i in range(201)]
    grid_bw = [bw / (0.5 + j / 200) for j in range(201)]
    best = min(itertools.product(grid_a, grid_bw), key=lambda p: rel_sq_error(*p, SIZES, ts))
    best_err = rel_sq_error(*best, SIZES, ts)
    assert rel_sq_error(fit.latency_s, fit.bandwidth_bytes_per_s, SIZES, ts) <= best_err * (1 + 1e-9)
    assert fit.latency_s == pytest.approx(best[0], abs=2 * a / 100 + 1e-12)
    assert 1 / fit.bandwidth_bytes_per_s == pytest.approx(1 / best[1], abs=2 / (bw * 200))
    assert fit.residual_rel == pytest.approx(math.sqrt(rel_sq_error(fit.latency_s, fit.bandwidth_bytes_per_s,
                                                                    SIZES, ts) / len(SIZES)))


def test_fit_clamps_negative_latency_and_flat_times():
    ns = [1 << 20, 2 << 20, 4 << 20]
    fit = fit_alpha_beta(ns, [n / 1e9 - 5e-4 for n in ns])      # unconstrained intercept < 0
    assert fit.latency_s == 0.0
    brute = min((rel_sq_error(0.0, bw, ns, [n / 1e9 - 5e-4 for n in ns]), bw)
                for bw in (1e9 * (0.5 + k / 1000) for k in range(2000)))
    assert fit.bandwidth_bytes_per_s == pytest.approx(brute[1], rel=2e-3)
    flat = fit_alpha_beta(ns, [1e-4, 1e-4, 1e-4])                # no size dependence at all
    assert flat.latency_s == pytest.approx(1e-4, rel=1e-3)
    assert flat.bandwidth_bytes_per_s == MAX_BANDWIDTH_BYTES_PER_S


@pytest.mark.parametrize("sizes,times", [([1], [1.0]), ([1, 2], [1.0]), ([4, 4], [1.0, 2.0]),
                                         ([1, 2], [0.0, 1.0]), ([1, 2], [float("nan"), 1.0])])
def test_fit_rejects_junk(sizes, times):
    with pytest.raises(InputError):
        fit_alpha_beta(sizes, times)


@pytest.mark.parametrize("text,value", [("4096", 4096), ("512MiB", 512 * 2 ** 20), ("80GB", 80 * 10 ** 9),
                                        ("1.5GiB", 3 * 2 ** 29), ("4 KiB", 4096), ("2kb", 2000), ("7B", 7)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "MiB", "-1GB", "12 parsecs", "1e9", "5 Mi", "GiB4"])
def test_parse_bytes_rejects_junk(text):
    with pytest.raises(InputError):
        parse_bytes(text)


def test_group_planning():
    assert default_group_sizes(2) == [2]
    assert default_group_sizes(6) == [2, 4, 6]
    one = plan_link_groups(["h"] * 4)
    assert (one.num_nodes, one.devices_per_node) == (1, 4)
    assert [g.ranks for g in one.collective_groups] == [(0, 1), (0, 1, 2, 3)]
    assert [g.ranks for g in one.pairs] == [(0, 1)]
    two = plan_link_groups(["a", "a", "b", "b"], [2, 4])
    assert [(g.link_class, g.ranks) for g in two.collective_groups] == [
        ("intra_node", (0, 1)), ("inter_node", (0, 2)), ("inter_node", (0, 2, 1, 3))]
    assert [(g.link_class, g.ranks) for g in two.pairs] == [("intra_node", (0, 1)), ("inter_node", (0, 2))]
    with pytest.raises(InputError, match="same number of ranks"):
        plan_link_groups(["a", "a", "b"])
    with pytest.raises(InputError, match="group sizes"):
        plan_link_groups(["a"] * 4, [8])


@pytest.mark.slow
def test_profile_cluster_two_processes(tmp_path):
    prof = profile_cluster(2, memory_per_device_bytes=parse_bytes("256MiB"),
                           sizes_bytes=[4096, 16384, 65536, 262144], warmup=1, repeats=3, matmul_n=256,
                           timeout_s=60)
    assert (prof.num_nodes, prof.devices_per_node, prof.source) == (1, 2, "measured")
    assert set(prof.links) == {"intra_node"}
    assert set(prof.links["intra_node"]) == set(COLLECTIVE_OPS)
    for op, fits in prof.links["intra_node"].items():
        assert list(fits) == [2]
        assert fits[2].latency_s >= 0 and fits[2].bandwidth_bytes_per_s > 0
        assert fits[2].time_s(262144) > 0
    assert prof.device.memory_bytes == 256 * 2 ** 20
    assert prof.device.compute_flops_per_s > 0 and prof.device.memory_bandwidth_bytes_per_s > 0
    assert len(prof.environment["measurements"]["intra_node"]["all_reduce"]["2"]["times_s"]) == 4
    prof.save(tmp_path / "c.json")
    assert ClusterProfile.load(tmp_path / "c.json").to_dict() == prof.to_dict()


def test_profile_cluster_bad_input():
    with pytest.raises(InputError, match="nproc"):
        profile_cluster(1, memory_per_device_bytes=None)
    with pytest.raises(InputError, match="memory"):
        profile_cluster(2, memory_per_device_bytes=0)
    with pytest.raises(InputError, match="sizes"):
        profile_cluster(2, memory_per_device_bytes=None, sizes_bytes=[4096])


@pytest.mark.slow
def test_profile_cluster_times_out_instead_of_hanging():
    # 200 rounds of an 8 MiB all-reduce cannot finish within 0.5 s: the watchdog (or gloo's own
    # timeout) must stop the workers and say so
    with pytest.raises(AutoplanError, match="cluster profile"):
        profile_cluster(2, memory_per_device_bytes=None, sizes_bytes=[4096, 8 << 20], repeats=200, timeout_s=0.5)


def two_fake_nodes_worker(rank: int, world_size: int, out_path: str) -> None:
    """``profile_cluster_distributed`` on every rank of a 4-process job; ranks 0,1 count as node "a" and
    2,3 as node "b": one machine standing in for two nodes."""
    from autoplan.profile.links import profile_cluster_distributed
    profile_cluster_distributed(out_path=out_path, sizes_bytes=[4096, 65536], warmup=1, repeats=2, matmul_n=128,
                                hostname="ab"[rank // 2])


SHARED_JOBS = {"two_fake_nodes": (4, two_fake_nodes_worker, lambda root: (str(root / "cluster.json"),), 120)}
"""in the session's 4-process job (tests/conftest.py)"""


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_profile_cluster_distributed_two_fake_nodes(shared_jobs):
    shared_jobs.get(__name__, "two_fake_nodes")
    (out,) = shared_jobs.args(__name__, "two_fake_nodes")
    prof = ClusterProfile.load(out)
    assert (prof.num_nodes, prof.devices_per_node) == (2, 2)
    assert prof.rank_hosts == ["a", "a", "b", "b"]
    assert sorted(prof.links["intra_node"]["all_reduce"]) == [2]
    assert sorted(prof.links["inter_node"]["all_reduce"]) == [2, 4]
    assert set(prof.links["inter_node"]) == set(COLLECTIVE_OPS)
    assert prof.link("all_reduce", 2, spans_nodes=True) is prof.links["inter_node"]["all_reduce"][2]


@pytest.mark.parametrize("nproc, device, needle", [
    (0, "cpu", "--nproc must be >= 1"),
    (2, "cuda", "several local processes are measured as CPU processes"),
    (None, "cpu", "needs --nproc N"),
])
def test_measure_cluster_refuses_before_measuring(nproc, device, needle, tmp_path, monkeypatch):
    """`profile cluster`'s choice of measurement is the library's: what it cannot measure is refused in one line."""
    from autoplan.profile.links import measure_cluster
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(InputError, match=needle):
        measure_cluster(nproc, out_path=tmp_path / "c.json", device=device)
    assert not (tmp_path / "c.json").exists()
