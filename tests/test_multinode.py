"""Across nodes: a cluster profile and a training job on two emulated nodes (network namespaces
joined by a shaped veth link, one torchrun agent per node; see benchmarks/emulated_cluster.py).

The emulated-node tests need root and ``ip netns``; they are skipped with the reason otherwise.
The two-agents-on-loopback test needs neither: it checks that agents sharing a hostname are told
apart by torchrun's GROUP_RANK.
"""

from __future__ import annotations

import importlib.util
import math
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cli_utils import run_cli
from autoplan.profile.formats import COLLECTIVE_OPS, ClusterProfile
from autoplan.profile.links import node_labels

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("emulated_cluster", REPO / "benchmarks" / "emulated_cluster.py")
emu = importlib.util.module_from_spec(_spec)
sys.modules["emulated_cluster"] = emu     # dataclasses look their module up by name
_spec.loader.exec_module(emu)

RATE_MBIT = 100.0
"""shaped inter-node rate of the test cluster: 12.5 MB/s, far below loopback's GB/s"""
STEP_RE = re.compile(r"^step (\d+) loss (\S+) time_s (\S+)$", re.M)


def test_node_labels_hostnames_or_group_ranks():
    # a real cluster: one agent per host -> the hostnames
    assert node_labels(["a", "a", "b", "b"], ["0", "0", "1", "1"]) == ["a", "a", "b", "b"]
    # agents sharing a hostname -> told apart by GROUP_RANK
    assert node_labels(["h"] * 4, ["0", "0", "1", "1"]) == ["h/node0", "h/node0", "h/node1", "h/node1"]
    # not under torchrun -> the hostnames as they are
    assert node_labels(["h", "h"], [None, None]) == ["h", "h"]


@pytest.mark.slow
def test_two_agents_sharing_a_hostname_profile_as_two_nodes(tmp_path):
    """Two torchrun agents on loopback (c10d rendezvous), one hostname: `autoplan profile cluster`
    under torchrun must still see 2 nodes x 2 and measure inter-node links."""
    out = tmp_path / "cluster.json"
    port = emu_free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
                               f"--node-rank={i}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                               "--rdzv-id=loopback-two-agents", "--rdzv-conf=join_timeout=60",
                               "-m", "autoplan.cli", "profile", "cluster", "--out", str(out),
                               "--memory-per-device", "64MiB", "--max-size", "64KiB", "--repeats", "2"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for i in range(2)]
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]
    prof = ClusterProfile.load(out)
    host = socket.gethostname()
    assert (prof.num_nodes, prof.devices_per_node) == (2, 2)
    assert prof.rank_hosts == [f"{host}/node0", f"{host}/node0", f"{host}/node1", f"{host}/node1"]
    assert set(prof.links) == {"intra_node", "inter_node"}
    assert "inter-node all_reduce" in outputs[0][0] + outputs[1][0]


def emu_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def shaped_cluster():
    reason = emu.unavailable_reason()
    if reason is not None:
        pytest.skip(f"emulated nodes unavailable: {reason}")
    with emu.emulated_cluster(emu.LinkShape(rate_mbit=RATE_MBIT, delay_ms=0.0)) as cluster:
        yield cluster
    for node in cluster.nodes:      # the namespaces are gone after the context
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
        assert node.netns not in listed


@pytest.mark.slow
def test_profile_solve_and_train_across_two_emulated_nodes(shaped_cluster, gpt_tiny_profile, tmp_path):
    """2 nodes x 2 processes across a 100 Mbit/s veth: the profile has both link classes, the
    inter-node one slower; a gpt-tiny plan (TP inside a node, DP across) trains through
    `autoplan run --nnodes 2 --node-rank i --rdzv-endpoint ...` with finite losses."""
    cluster = shaped_cluster
    prof_path = tmp_path / "cluster.json"
    emu.profile_across_nodes(cluster, prof_path, memory_per_device="256MiB", max_size="256KiB", repeats=2,
                             timeout_s=120)
    prof = ClusterProfile.load(prof_path)
    assert (prof.num_nodes, prof.devices_per_node) == (2, 2)
    assert prof.rank_hosts == [n.hostname for n in cluster.nodes for _ in range(2)]
    assert set(prof.links) == {"intra_node", "inter_node"}
    assert set(prof.links["inter_node"]) == set(COLLECTIVE_OPS)
    intra = prof.links["intra_node"]["all_reduce"][2].bandwidth_bytes_per_s
    inter = prof.links["inter_node"]["all_reduce"][2].bandwidth_bytes_per_s
    assert inter < intra / 4, (inter, intra)
    # the shaping is really there: an unshaped veth moves GB/s; 100 Mbit/s is 12.5 MB/s (tbf
    # bursts and the fit's error allowed for)
    assert inter < 4 * RATE_MBIT * 1e6 / 8, inter

    plan_path = tmp_path / "plan.json"
    # the solve runs in this process (the processes under test are the agents'), from the session's measured
    # gpt-tiny profile (tests/conftest.py) rather than measuring gpt-tiny again
    solve = run_cli("solve", "--model", str(gpt_tiny_profile), "--cluster", str(prof_path), "--global-batch", "8",
                    "--layout", "dp=2,tp=2", "--optimizer", "sgd", "--out", str(plan_path))
    assert solve.returncode == 0, solve.stderr[-2000:]

    runs = cluster.run_on_nodes(
        lambda node: [sys.executable, "-m", "autoplan.cli", "run", str(plan_path), "--nnodes", "2",
                      "--node-rank", str(node.index), "--rdzv-endpoint", cluster.rdzv_endpoint, "--",
                      "examples/train_gpt.py", "--steps", "3"],
        timeout_s=150)
    steps = [(int(n), float(loss)) for n, loss, _ in STEP_RE.findall(runs[0].stdout + runs[1].stdout)]
    assert [n for n, _ in steps] == [0, 1, 2], runs[0].stdout[-2000:]
    assert all(math.isfinite(loss) for _, loss in steps)
