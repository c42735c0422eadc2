"""Elastic re-plan on two emulated nodes (network namespaces joined by a veth; one `autoplan run
--elastic` agent per node, see benchmarks/emulated_cluster.py).

gpt-tiny, 2 nodes x 2 processes, SGD, a checkpoint every CKPT_EVERY steps:

1. both nodes train under the 4-device plan;
2. node 1 is lost (every process in its namespace is SIGKILLed) after step KILL_AFTER: node 0's
   agent re-solves for its 2 devices, logs the re-plan, and its workers resume from the last
   checkpoint under the new plan; its losses equal those of a separate 2-process run started from a
   copy of that checkpoint with that plan;
3. node 1 comes back: node 0 takes it in at the next checkpoint, the job re-plans back to the
   4-device plan and finishes; those losses equal a 4-process run from that checkpoint.

Node 1's agent restarts as soon as node 0 has re-planned (its start overlaps node 0's restart), and
node 0's workers are held (SIGSTOP) from their resume until node 0's agent sees node 1 waiting: the
steps trained on 2 devices before the grow no longer depend on the machine's speed, so the job can
be short (STEPS) and still grow back before its end.

Skipped, with the reason, where namespaces cannot be made (not root, no `ip netns`).

    python -m pytest tests/test_elastic.py -q
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cli_utils import run_cli

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("emulated_cluster", REPO / "benchmarks" / "emulated_cluster.py")
emu = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("emulated_cluster", emu)
_spec.loader.exec_module(emu)

STEPS, CKPT_EVERY, KILL_AFTER = 120, 10, 15
"""STEPS: the kill lands at step 15-50 (the test polls the log every 0.2 s), the 2-device phase is held
from its resume (at most 0.2 s of steps after it) until node 1 waits and grows at the next checkpoint:
the grown job has 30 steps or more left to compare"""
GLOBAL_BATCH = 8
COMPARED_STEPS = 30
"""steps after each resume compared with a separate run from the same checkpoint (at most: the 2-device
phase ends at the grow, 10 or more steps after its resume)"""
WAITING = "node(s) waiting to join: growing at the next checkpoint"
STEP_RE = re.compile(r"^(?:step (\d+) loss (\S+) time_s \S+|resumed from step (\d+) .*)$", re.M)


def segments(stdout: str) -> list[tuple[int, list[tuple[int, float]]]]:
    """The runs in a training log: [(first step, [(step, loss), ...]), ...], split at each
    ``resumed from step N`` line."""
    out: list[tuple[int, list[tuple[int, float]]]] = []
    for step, loss, resumed in STEP_RE.findall(stdout):
        if resumed:
            out.append((int(resumed), []))
        else:
            if not out:
                out.append((0, []))
            out[-1][1].append((int(step), float(loss)))
    return out


def two_node_profile(hosts: list[str]) -> dict:
    """The shipped 4-process CPU profile, as 2 nodes x 2 (inter-node links 10x slower)."""
    d = json.loads((REPO / "profiles" / "cpu-4proc.json").read_text())
    d.update(num_nodes=2, devices_per_node=2, world_size=4, rank_hosts=[h for h in hosts for _ in range(2)])
    inter = json.loads(json.dumps(d["links"]["intra_node"]))
    for fits in inter.values():
        for f in fits.values():
            f["bandwidth_bytes_per_s"] /= 10
    d["links"]["inter_node"] = inter
    return d


def netns_pids(netns: str) -> list[int]:
    proc = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=10)
    return [int(p) for p in proc.stdout.split()]


def signal_workers(node, sig: int) -> list[int]:
    """``sig`` to the node's training processes (not its agent); returns their pids."""
    done = []
    for p in netns_pids(node.netns):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            if any(a.endswith(b"train_gpt.py") for a in argv) and b"autoplan.cli" not in argv:
                os.kill(p, sig)
                done.append(p)
        except OSError:
            pass
    return done


def kill_node(node) -> None:
    """Every process of the node, at once: a lost machine."""
    for p in netns_pids(node.netns):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def reference(plan: Path, ckpt_src: Path, step: int, until: int, workdir: Path, nproc: int) -> dict[int, float]:
    """Losses of a plain torchrun run of ``plan`` from a copy of the checkpoint of ``step``."""
    ckpt = workdir / f"ref-from-{step}"
    ckpt.mkdir(parents=True)
    shutil.copytree(ckpt_src / f"step_{step:08d}", ckpt / f"step_{step:08d}")
    (ckpt / "latest").write_text(json.dumps({"step": step, "dir": f"step_{step:08d}"}))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                           "examples/train_gpt.py", "--plan", str(plan), "--steps", str(until), "--optimizer", "sgd",
                           "--ckpt-dir", str(ckpt)], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (seg,) = segments(proc.stdout)
    assert seg[0] == step, proc.stdout[:500]
    return dict(seg[1])


# -- the pieces, without processes ---------------------------------------------------------------------------

def test_replan_restricts_the_cluster_and_keeps_the_training(tmp_path):
    import random

    from planner_instances import random_model_profile

    from autoplan.errors import AutoplanError
    from autoplan.execute.elastic import replan
    from autoplan.plan.api import restrict_cluster, solve
    from autoplan.plan.plan import Plan
    from autoplan.profile.formats import ClusterProfile

    prof = random_model_profile(random.Random(1), n_blocks=4)
    prof.shape["heads"] = prof.shape["kv_heads"] = 4
    prof.save(tmp_path / "model.json")
    (tmp_path / "cluster.json").write_text(json.dumps(two_node_profile(["a", "b"])))
    full = ClusterProfile.load(tmp_path / "cluster.json")
    half = restrict_cluster(full, 1)
    assert (half.num_nodes, half.devices_per_node, half.rank_hosts) == (1, 2, ["a", "a"])
    assert half.links == full.links and full.num_nodes == 2          # the original is untouched

    plan = solve(str(tmp_path / "model.json"), str(tmp_path / "cluster.json"), 8, optimizer="sgd",
                 memory_per_device_bytes=2**30)
    plan.save(tmp_path / "plan.json")
    plan = Plan.load(tmp_path / "plan.json")
    assert plan.training.memory_per_device_bytes == 2**30
    assert replan(plan, 4) is plan
    small = replan(plan, 2)
    assert small.layout.world_size == 2 and small.layout.global_batch == 8
    assert small.training == type(plan.training)(**{**plan.training.__dict__, "world_size": 2})
    small.layout.check_against(2, prof.layer_names(), 8)
    with pytest.raises(AutoplanError, match="whole nodes"):
        replan(plan, 3)


def test_grow_only_after_a_new_checkpoint(tmp_path):
    from autoplan.execute.elastic import GrowAtCheckpoint

    class Handler:
        waiting = 0

        def num_nodes_waiting(self) -> int:
            return self.waiting

        def get_run_id(self) -> str:
            return "run"

    def marker(step: int) -> None:
        (tmp_path / f"step_{step:08d}").mkdir(exist_ok=True)
        (tmp_path / f"step_{step:08d}" / ".metadata").write_bytes(b"")
        (tmp_path / "latest").write_text(json.dumps({"step": step, "dir": f"step_{step:08d}"}))

    h = Handler()
    grow = GrowAtCheckpoint(h, tmp_path)
    assert grow.get_run_id() == "run"            # everything else is the wrapped handler's
    marker(20)
    assert grow.num_nodes_waiting() == 0
    h.waiting = 1
    assert grow.num_nodes_waiting() == 0         # seen waiting at step 20: wait for the next checkpoint
    assert grow.num_nodes_waiting() == 0
    marker(40)
    assert grow.num_nodes_waiting() == 1         # a checkpoint since: restart now


def test_script_arguments():
    from autoplan.execute.elastic import _replace_arg, script_arg
    assert _replace_arg(["--steps", "3", "--plan", "a.json"], "--plan", "b.json") == ["--steps", "3", "--plan", "b.json"]
    assert _replace_arg(["--plan=a.json"], "--plan", "b.json") == ["--plan=b.json"]
    assert _replace_arg(["--steps", "3"], "--plan", "b.json") == ["--plan", "b.json", "--steps", "3"]
    assert script_arg(["--ckpt-dir", "x", "--steps", "2"], "--ckpt-dir") == "x"
    assert script_arg(["--ckpt-dir=y"], "--ckpt-dir") == "y" and script_arg([], "--ckpt-dir") is None


# -- two emulated nodes -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    reason = emu.unavailable_reason()
    if reason is not None:
        pytest.skip(f"emulated nodes unavailable: {reason}")
    with emu.emulated_cluster(emu.UNSHAPED) as c:
        yield c


class NodeProcess:
    """`autoplan run --elastic ...` inside one emulated node, its output in files."""

    def __init__(self, cluster, node, argv: list[str], logdir: Path, tag: str):
        self.out, self.err = logdir / f"{tag}.out", logdir / f"{tag}.err"
        with open(self.out, "wb") as fo, open(self.err, "wb") as fe:
            self.proc = subprocess.Popen(cluster.node_command(node, argv), stdout=fo, stderr=fe,
                                         stdin=subprocess.DEVNULL, env=cluster.node_env(node), cwd=REPO,
                                         start_new_session=True)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


def wait_for(condition, timeout_s: float, what: str, *procs: NodeProcess) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.out.name}\n{p.stdout()[-1500:]}\n{p.stderr()[-3000:]}" for p in procs)
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_lose_a_node_replan_and_grow_back(cluster, gpt_tiny_profile, tmp_path):
    from autoplan.plan.plan import Plan

    model = tmp_path / "model.json"
    shutil.copyfile(gpt_tiny_profile, model)
    cl = tmp_path / "cluster.json"
    cl.write_text(json.dumps(two_node_profile([n.hostname for n in cluster.nodes])))
    plan = tmp_path / "plan.json"
    solve = run_cli("solve", "--model", str(model), "--cluster", str(cl), "--global-batch", str(GLOBAL_BATCH),
                    "--optimizer", "sgd", "--out", str(plan))      # in this process: the agents are under test
    assert solve.returncode == 0, solve.stderr
    assert Plan.load(plan).layout.world_size == 4
    ckpt = tmp_path / "ckpt"

    def agent(node, tag: str) -> NodeProcess:
        return NodeProcess(cluster, node, [
            sys.executable, "-m", "autoplan.cli", "run", str(plan), "--elastic", "--nnodes", "2", "--min-nodes", "1",
            "--node-rank", str(node.index), "--rdzv-endpoint", cluster.rdzv_endpoint, "--rejoin-timeout", "5", "--",
            "examples/train_gpt.py", "--steps", str(STEPS), "--optimizer", "sgd", "--ckpt-dir", str(ckpt),
            "--ckpt-every", str(CKPT_EVERY)], tmp_path, tag)

    node0, node1 = cluster.nodes
    a0 = agent(node0, "node0")
    time.sleep(1.0)             # node 0 holds the rendezvous store: let it bind first
    a1 = agent(node1, "node1")
    procs = [a0, a1]
    try:
        def steps_done() -> int:
            got = [s for _, seg in segments(a0.stdout() + a1.stdout()) for s, _ in seg]
            return max(got, default=-1)
        wait_for(lambda: steps_done() >= KILL_AFTER, 240, f"step {KILL_AFTER} on 4 devices", *procs)
        kill_node(node1)
        a1.proc.wait(30)
        wait_for(lambda: "re-plan: 4 -> 2 devices" in a0.stderr(), 240, "the re-plan for node 0 alone", *procs)
        a1b = agent(node1, "node1-back")       # the 2-device round is complete: node 1 waits for the next one
        procs.append(a1b)
        wait_for(lambda: "resumed from step" in a0.stdout(), 240, "node 0 to resume on 2 devices", *procs)
        if WAITING not in a0.stderr():
            held = signal_workers(node0, signal.SIGSTOP)       # hold the 2-device phase until node 1 is back
            try:
                assert len(held) == 2, f"node 0's workers: {held}"
                wait_for(lambda: WAITING in a0.stderr(), 240, "node 1 to wait to join", *procs)
            finally:
                signal_workers(node0, signal.SIGCONT)
        wait_for(lambda: "re-plan: 2 -> 4 devices" in a0.stderr(), 240, "the job to grow back to 4 devices", *procs)
        wait_for(lambda: a0.proc.poll() is not None and a1b.proc.poll() is not None, 300, "the end of training",
                 *procs)
        assert a0.proc.returncode == 0 and a1b.proc.returncode == 0, (a0.stderr()[-3000:], a1b.stderr()[-3000:])
    finally:
        for node in cluster.nodes:
            kill_node(node)

    log = a0.stderr()
    shrink = next(l for l in log.splitlines() if "re-plan: 4 -> 2 devices" in l)
    assert "predicted" in shrink and "s/step" in shrink, shrink
    small_plan = Plan.load(tmp_path / "plan.world2.json")
    assert small_plan.layout.world_size == 2 and small_plan.training.global_batch == GLOBAL_BATCH
    assert small_plan.layout.short() in shrink and Plan.load(plan).layout.short() in shrink
    assert "re-plan: 2 -> 4 devices" in log and not (tmp_path / "plan.world4.json").exists()

    segs = segments(a0.stdout() + a1b.stdout())
    first, on_two, *rest = segs
    last1 = max(s for s, _ in first[1])
    assert first[0] == 0 and last1 >= KILL_AFTER
    start2, losses2 = on_two
    # the last complete checkpoint when node 1 died: the save of the last step printed may not have finished
    assert start2 % CKPT_EVERY == 0 and last1 + 1 - CKPT_EVERY <= start2 <= last1 + 1, (last1, start2)
    # the grown job resumes from a later checkpoint, under the original plan, and finishes
    start4, losses4 = rest[-1]
    assert start4 > start2 and start4 % CKPT_EVERY == 0
    assert losses4[-1][0] == STEPS - 1

    # the two reference runs (separate torchrun jobs) at once: 2 cores fill each other's gaps
    until2 = min(max(s for s, _ in losses2) + 1, start2 + COMPARED_STEPS)
    until4 = min(STEPS, start4 + COMPARED_STEPS)
    with ThreadPoolExecutor(1) as alongside:
        on_four = alongside.submit(reference, plan, ckpt, start4, until4, tmp_path, 4)
        want2 = reference(tmp_path / "plan.world2.json", ckpt, start2, until2, tmp_path, 2)
        want4 = on_four.result()
    # on 2 devices: the same losses as a 2-process run of that plan from that checkpoint
    assert sorted(want2) == list(range(start2, until2))
    for step, loss in losses2[:until2 - start2]:
        assert loss == want2[step], f"2 devices, step {step}: {loss} != {want2[step]}"
    # back on 4: the same losses as a 4-process run of the original plan from the checkpoint it grew at
    assert sorted(want4) == list(range(start4, until4))
    for step, loss in losses4[:until4 - start4]:
        assert loss == want4[step], f"4 devices, step {step}: {loss} != {want4[step]}"
