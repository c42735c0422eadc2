"""Two "nodes" on one machine, joined by a slow link: profile them, plan for them, train on them.

    sudo python benchmarks/emulated_cluster.py --compare                  # shaped vs unshaped, end to end
    sudo python benchmarks/emulated_cluster.py --rate-mbit 100 --delay-ms 5 --profile-only

How the emulation works (root only; nothing outside the namespaces it creates is touched):

- each node is a network namespace ``ap<suffix>n<i>`` (random suffix), with ``lo`` up and one end
  of a veth pair, ``10.213.<x>.<i+1>/24`` (``x`` random); the veth pair is the inter-node link,
  loopback inside a namespace is the intra-node link;
- the link is shaped on both ends with ``tc``: ``netem delay D rate R`` where the kernel has
  ``sch_netem``, else a token bucket ``tbf rate R`` (rate only: the delay cannot be added and the
  run says so; the profile measures the latency that is really there). "Unshaped" adds no qdisc;
- each node has its own hostname (a UTS namespace, ``unshare --uts``) that resolves to its veth
  address through ``/etc/netns/<ns>/hosts`` (``ip netns exec`` binds it over ``/etc/hosts``), as
  on a real cluster: so torchrun's c10d rendezvous finds its host by name, ``MASTER_ADDR``
  resolves on the other node, and ``GLOO_SOCKET_IFNAME`` names the veth;
- one torchrun agent runs per namespace (``--nnodes 2 --nproc-per-node 2``, c10d rendezvous at
  node 0's address): world size 4, ranks 0-1 on node 0 and 2-3 on node 1;
- the namespaces (which takes the veths with them) and the hosts files are removed on leaving
  the context manager, at interpreter exit, and on SIGTERM; every process is started in its own
  session and killed as a group when it overruns its timeout.

``--compare`` measures, for a shaped and an unshaped link: the cluster profile across the nodes
(``autoplan profile cluster`` under torchrun), the layout the planner chooses for a small model
under a per-device memory budget, and the measured step time (``autoplan/execute/measure.py``) of
the chosen layout and of the best layout with other degrees, against the prediction.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RDZV_PORT = 29400
"""c10d rendezvous port on node 0 (torchrun's default); free, since the namespace is new"""
COMMAND_TIMEOUT_S = 30.0
"""bound on each ``ip``/``tc`` call"""
JOIN_TIMEOUT_S = 90
"""how long a torchrun agent waits for the other node at the rendezvous"""


class EmulationError(RuntimeError):
    """The emulated cluster could not be made, or a job on it failed or overran its timeout."""


@dataclass(frozen=True)
class LinkShape:
    """How the inter-node link is shaped, on both ends of the veth."""

    rate_mbit: float | None = 200.0
    """link rate in Mbit/s (None: no rate limit)"""
    delay_ms: float = 2.0
    """added one-way delay per end in ms (needs the kernel's sch_netem; 0: none)"""

    def __post_init__(self) -> None:
        if self.rate_mbit is not None and self.rate_mbit <= 0:
            raise ValueError(f"rate_mbit must be positive or None, got {self.rate_mbit}")
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {self.delay_ms}")

    @property
    def unshaped(self) -> bool:
        return self.rate_mbit is None and self.delay_ms == 0

    def describe(self) -> str:
        if self.unshaped:
            return "unshaped"
        parts = ([f"{self.rate_mbit:g} Mbit/s"] if self.rate_mbit is not None else []) + \
                ([f"+{self.delay_ms:g} ms delay per end"] if self.delay_ms else [])
        return ", ".join(parts)


UNSHAPED = LinkShape(rate_mbit=None, delay_ms=0.0)


@dataclass(frozen=True)
class EmulatedNode:
    """One node: a network namespace with its end of the veth and its own hostname."""

    index: int
    netns: str
    veth: str
    address: str
    hostname: str


@dataclass
class NodeRun:
    """What one node's process did."""

    node: EmulatedNode
    returncode: int
    stdout: str
    stderr: str


@dataclass
class EmulatedCluster:
    """Nodes made by :func:`emulated_cluster`; runs commands inside them."""

    nodes: tuple[EmulatedNode, ...]
    shape: LinkShape
    qdisc: str
    """the tc qdisc really applied on each veth end ("none" when unshaped)"""
    notes: list[str] = field(default_factory=list)
    """what could not be applied as asked (for example the delay without sch_netem)"""

    @property
    def rdzv_endpoint(self) -> str:
        """host:port of the c10d rendezvous: node 0's hostname (resolvable inside every node)."""
        return f"{self.nodes[0].hostname}:{RDZV_PORT}"

    def node_command(self, node: EmulatedNode, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``node``: its network namespace and a UTS namespace with its hostname."""
        return ["ip", "netns", "exec", node.netns, "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', node.hostname, *argv]

    def node_env(self, node: EmulatedNode) -> dict[str, str]:
        """The environment of a process on ``node``: gloo (and NCCL) bound to the veth."""
        return {**os.environ, "GLOO_SOCKET_IFNAME": node.veth, "NCCL_SOCKET_IFNAME": node.veth,
                "PYTHONUNBUFFERED": "1"}

    def torchrun_args(self, node: EmulatedNode, nproc_per_node: int, run_id: str) -> list[str]:
        """``python -m torch.distributed.run`` for one node of this cluster (c10d rendezvous)."""
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={len(self.nodes)}",
                f"--nproc-per-node={nproc_per_node}", f"--node-rank={node.index}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={self.rdzv_endpoint}", f"--rdzv-id={run_id}",
                f"--rdzv-conf=join_timeout={JOIN_TIMEOUT_S},read_timeout={JOIN_TIMEOUT_S}", "--max-restarts=0"]

    def run_on_nodes(self, argv_of: Callable[[EmulatedNode], list[str]], *, timeout_s: float,
                     cwd: Path = REPO) -> list[NodeRun]:
        """Start ``argv_of(node)`` inside every node at once; wait for all, at most ``timeout_s``.

        Raises :class:`EmulationError` (with the tails of every node's output) when one exits
        non-zero or the time runs out; all of them are then killed, as process groups."""
        procs: list[tuple[EmulatedNode, subprocess.Popen, Path, Path]] = []
        with tempfile.TemporaryDirectory(prefix="autoplan-emu-") as tmp:
            try:
                for node in self.nodes:
                    out, err = Path(tmp) / f"{node.index}.out", Path(tmp) / f"{node.index}.err"
                    with open(out, "wb") as fo, open(err, "wb") as fe:
                        p = subprocess.Popen(self.node_command(node, argv_of(node)), stdout=fo, stderr=fe,
                                             stdin=subprocess.DEVNULL, env=self.node_env(node), cwd=cwd,
                                             start_new_session=True)
                    procs.append((node, p, out, err))
                deadline = time.monotonic() + timeout_s
                while any(p.poll() is None for _, p, _, _ in procs):
                    failed = [p for _, p, _, _ in procs if p.poll() not in (None, 0)]
                    if failed or time.monotonic() > deadline:
                        time.sleep(2.0 if failed else 0.0)      # let the others print why
                        _kill_groups([p for _, p, _, _ in procs])
                        break
                    time.sleep(0.1)
            finally:
                _kill_groups([p for _, p, _, _ in procs])
            runs = [NodeRun(node, p.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"))
                    for node, p, out, err in procs]
        if any(r.returncode != 0 for r in runs):
            tails = "\n".join(f"--- node {r.node.index} exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"
                              for r in runs)
            raise EmulationError(f"job on the emulated nodes failed or ran past {timeout_s:g} s:\n{tails}")
        return runs


def _kill_groups(procs: Sequence[subprocess.Popen]) -> None:
    """SIGKILL the process group of each still-running process we started, then reap it."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        if p.poll() is None:
            p.wait(timeout=10)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise EmulationError(f"{' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (None if they can): not root, no ``ip``/``tc``/``unshare``,
    or ``ip netns add`` refused."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs and tc)"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command is not installed"
    probe = f"approbe{secrets.token_hex(3)}"
    proc = _ip("ip", "netns", "add", probe, check=False)
    if proc.returncode != 0:
        return f"`ip netns add` failed: {proc.stderr.strip()}"
    _ip("ip", "netns", "del", probe, check=False)
    return None


def _cleanup(netns_names: Sequence[str]) -> None:
    """Delete the namespaces (their veth ends go with them) and their hosts files; idempotent."""
    for ns in netns_names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=COMMAND_TIMEOUT_S)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def _shape_link(node: EmulatedNode, shape: LinkShape) -> tuple[str, list[str]]:
    """Apply ``shape`` on ``node``'s veth end; (the qdisc applied, notes)."""
    if shape.unshaped:
        return "none", []
    netem = ["netem"] + (["delay", f"{shape.delay_ms:g}ms"] if shape.delay_ms else []) + \
            (["rate", f"{shape.rate_mbit:g}mbit"] if shape.rate_mbit is not None else [])
    tc = ["ip", "netns", "exec", node.netns, "tc", "qdisc", "add", "dev", node.veth, "root"]
    proc = _ip(*tc, *netem, check=False)
    if proc.returncode == 0:
        return " ".join(netem), []
    if "unknown" not in proc.stderr.lower():
        raise EmulationError(f"tc netem on {node.veth}: {proc.stderr.strip()}")
    # no sch_netem in this kernel: a token bucket gives the rate; the delay cannot be emulated
    notes = [f"kernel has no sch_netem: the {shape.delay_ms:g} ms delay is NOT applied"] if shape.delay_ms else []
    if shape.rate_mbit is None:
        return "none", notes
    # burst 64 KiB: one GSO segment; latency: a queue of up to 1 s before drops (a 100 ms queue
    # dropped DDP's multi-MB buckets into TCP retransmission timeouts: steps 10x slower than the rate)
    tbf = ["tbf", "rate", f"{shape.rate_mbit:g}mbit", "burst", "64kb", "latency", "1s"]
    _ip(*tc, *tbf)
    return " ".join(tbf), notes


@contextmanager
def emulated_cluster(shape: LinkShape = LinkShape(), num_nodes: int = 2) -> Iterator[EmulatedCluster]:
    """Make ``num_nodes`` namespaces joined by a shaped link (module docstring); always removed after.

    Raises :class:`EmulationError` when something cannot be made (see :func:`unavailable_reason`)."""
    if num_nodes != 2:
        raise ValueError("one veth pair joins exactly two nodes")
    suffix = secrets.token_hex(3)
    subnet = f"10.213.{secrets.randbelow(254) + 1}"
    nodes = tuple(EmulatedNode(index=i, netns=f"ap{suffix}n{i}", veth=f"ap{suffix}v{i}", address=f"{subnet}.{i + 1}",
                               hostname=f"node{i}-{suffix}") for i in range(num_nodes))
    names = [n.netns for n in nodes]
    atexit.register(_cleanup, names)
    try:
        for n in nodes:
            _ip("ip", "netns", "add", n.netns)
        _ip("ip", "link", "add", nodes[0].veth, "type", "veth", "peer", "name", nodes[1].veth)
        hosts = "127.0.0.1 localhost\n::1 localhost\n" + "".join(f"{n.address} {n.hostname}\n" for n in nodes)
        for n in nodes:
            _ip("ip", "link", "set", n.veth, "netns", n.netns)
            _ip("ip", "-n", n.netns, "addr", "add", f"{n.address}/24", "dev", n.veth)
            _ip("ip", "-n", n.netns, "link", "set", n.veth, "up")
            _ip("ip", "-n", n.netns, "link", "set", "lo", "up")
            Path(f"/etc/netns/{n.netns}").mkdir(parents=True, exist_ok=True)
            Path(f"/etc/netns/{n.netns}/hosts").write_text(hosts)
        applied = [_shape_link(n, shape) for n in nodes]
        notes = sorted({note for _, ns in applied for note in ns})
        yield EmulatedCluster(nodes=nodes, shape=shape, qdisc=applied[0][0], notes=notes)
    finally:
        _cleanup(names)
        atexit.unregister(_cleanup)


# --------------------------------------------------------------------------------------------
# jobs on the cluster
# --------------------------------------------------------------------------------------------

def profile_across_nodes(cluster: EmulatedCluster, out_path: Path, *, memory_per_device: str,
                         max_size: str = "1MiB", repeats: int = 3, nproc_per_node: int = 2,
                         timeout_s: float = 300.0) -> list[NodeRun]:
    """``autoplan profile cluster`` under torchrun on every node; rank 0 writes ``out_path``."""
    run_id = f"profile-{secrets.token_hex(4)}"
    return cluster.run_on_nodes(
        lambda node: [*cluster.torchrun_args(node, nproc_per_node, run_id), "-m", "autoplan.cli", "profile",
                      "cluster", "--out", str(out_path), "--memory-per-device", memory_per_device,
                      "--max-size", max_size, "--repeats", str(repeats)],
        timeout_s=timeout_s)


def run_plan_across_nodes(cluster: EmulatedCluster, plan_path: Path, script: str, script_args: Sequence[str], *,
                          timeout_s: float) -> list[NodeRun]:
    """``script`` under the plan's layout on every node: the command of
    :func:`autoplan.execute.launch.torchrun_command`, with the rendezvous bounded in time."""
    from autoplan.execute.launch import torchrun_command

    def argv(node: EmulatedNode) -> list[str]:
        cmd = torchrun_command(plan_path, script, script_args, nnodes=len(cluster.nodes), node_rank=node.index,
                               rdzv_endpoint=cluster.rdzv_endpoint)
        # cmd[:3] is "python -m torch.distributed.run"; one job id and a bounded join for both agents
        return [*cmd[:3], f"--rdzv-id={run_id}", f"--rdzv-conf=join_timeout={JOIN_TIMEOUT_S},"
                f"read_timeout={JOIN_TIMEOUT_S}", *cmd[3:]]
    run_id = f"run-{secrets.token_hex(4)}"
    return cluster.run_on_nodes(argv, timeout_s=timeout_s)


@dataclass(frozen=True)
class LinkFigures:
    """Fitted latency and bandwidth of one op on one link class."""

    link_class: str
    op: str
    group_size: int
    latency_s: float
    bandwidth_bytes_per_s: float


def link_figures(profile_path: Path) -> list[LinkFigures]:
    """all_reduce on 2 and send_recv, for each measured link class of a cluster profile."""
    from autoplan.profile.formats import ClusterProfile
    cl = ClusterProfile.load(profile_path)
    rows = []
    for cls in ("intra_node", "inter_node"):
        for op in ("all_reduce", "send_recv"):
            fit = cl.links.get(cls, {}).get(op, {}).get(2)
            if fit is not None:
                rows.append(LinkFigures(cls, op, 2, fit.latency_s, fit.bandwidth_bytes_per_s))
    return rows


# --------------------------------------------------------------------------------------------
# --compare
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompareConfig:
    """The model, batch and budget planned for in ``--compare``."""

    model: str = "gpt-small"
    global_batch: int = 16
    memory_per_device: str = "64MiB"
    """per-process budget the plan must fit (CPU): small enough that layouts differ"""
    optimizer: str = "adamw"
    steps: int = 4
    warmup: int = 1
    profile_max_size: str = "1MiB"
    allow_lossy: tuple[str, ...] = ()
    """lossy options the planner may use (fp16, powersgd, localsgd); empty: exact training only"""


@dataclass(frozen=True)
class MeasuredLayout:
    name: str
    layout: str
    predicted_step_time_s: float
    measured_step_time_s: float
    predicted_breakdown_s: dict
    tp_spans_nodes: bool
    dp_spans_nodes: bool
    pp_spans_nodes: bool


def _say(text: str) -> None:
    print(text, flush=True)


def compare_one(shape: LinkShape, cfg: CompareConfig, model_profile: Path, workdir: Path) -> list[MeasuredLayout]:
    """Profile, solve, and run the chosen layout and the best one with other degrees, for ``shape``."""
    from autoplan.plan.api import Problem, solve_problem
    from autoplan.plan.groups import spans_nodes
    from autoplan.plan.training import TrainingConfig
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    from autoplan.profile.links import parse_bytes

    workdir.mkdir(parents=True, exist_ok=True)
    with emulated_cluster(shape) as cluster:
        _say(f"== link {shape.describe()}: qdisc '{cluster.qdisc}' on {cluster.nodes[0].veth}/{cluster.nodes[1].veth}"
             f" ({', '.join(n.netns for n in cluster.nodes)})")
        for note in cluster.notes:
            _say(f"   note: {note}")
        prof_path = workdir / "cluster.json"
        t0 = time.perf_counter()
        profile_across_nodes(cluster, prof_path, memory_per_device=cfg.memory_per_device,
                             max_size=cfg.profile_max_size)
        cl = ClusterProfile.load(prof_path)
        _say(f"   profiled {cl.num_nodes} nodes x {cl.devices_per_node} in {time.perf_counter() - t0:.0f} s; "
             f"rank_hosts {cl.rank_hosts}")
        for f in link_figures(prof_path):
            _say(f"   {f.link_class:<10} {f.op:<10} g={f.group_size}: latency {f.latency_s * 1e6:9.1f} us, "
                 f"bandwidth {f.bandwidth_bytes_per_s / 1e6:9.1f} MB/s")
        prof = ModelProfile.load(model_profile)
        train = TrainingConfig(global_batch=cfg.global_batch, precision="fp32", optimizer=cfg.optimizer)
        cl.device.memory_bytes = parse_bytes(cfg.memory_per_device)
        from autoplan.plan.search import SearchOptions
        plan = solve_problem(Problem(prof, cl, train, str(model_profile), str(prof_path)),
                             SearchOptions(allow_lossy=cfg.allow_lossy))
        plan.training.model_spec = cfg.model
        plan.save(workdir / "plan.json")
        runs = [("chosen", plan.layout, plan.predicted, workdir / "plan.json")]
        other = plan.other_degrees_alternative()
        if other is not None:
            alt, alt_plan = other
            alt_plan.save(workdir / "plan_alternative.json")
            runs.append((f"alternative ({alt.family})", alt.layout, alt.predicted, workdir / "plan_alternative.json"))
        for name, lay, pred, _ in runs:
            _say(f"   {name}: {lay.short()}, predicted {pred.step_time_s:.3f} s")
        results = []
        for name, lay, pred, path in runs:
            out = workdir / f"measured_{path.stem}.json"
            run_plan_across_nodes(cluster, path, "autoplan/execute/measure.py",
                                  ["--steps", str(cfg.steps), "--warmup", str(cfg.warmup), "--out", str(out)],
                                  timeout_s=600.0)
            measured = json.loads(out.read_text())
            tp_x, dp_x, pp_x = spans_nodes(lay.dp, lay.tp, lay.pp, cl.devices_per_node, cl.num_nodes)
            results.append(MeasuredLayout(name=name, layout=lay.short(), predicted_step_time_s=pred.step_time_s,
                                          measured_step_time_s=statistics.median(measured["step_times_s"]),
                                          predicted_breakdown_s=dict(pred.breakdown_s), tp_spans_nodes=tp_x,
                                          dp_spans_nodes=dp_x, pp_spans_nodes=pp_x))
    for r in results:
        across = [d for d, x in (("tp", r.tp_spans_nodes), ("dp", r.dp_spans_nodes), ("pp", r.pp_spans_nodes)) if x]
        terms = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in r.predicted_breakdown_s.items() if v > 0)
        _say(f"   {r.name:<28} {r.layout:<44} predicted {r.predicted_step_time_s:7.3f} s  measured "
             f"{r.measured_step_time_s:7.3f} s  across nodes: {'+'.join(across) or 'nothing'}  [ms: {terms}]")
    return results


def compare(shaped: LinkShape, cfg: CompareConfig, workdir: Path) -> int:
    """``--compare``: the model profile once, then :func:`compare_one` for ``shaped`` and unshaped."""
    from autoplan.profile.layers import profile_model
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    model_path = workdir / "model.json"
    _say(f"profiling {cfg.model} layers (mbs 1,2,4; tp 1,2) ...")
    profile_model(cfg.model, mbs_list=(1, 2, 4), tp_list=(1, 2), repeats=3, threads=1).save(model_path)
    _say(f"model {cfg.model}, global batch {cfg.global_batch}, {cfg.memory_per_device} per device, {cfg.optimizer}; "
         f"2 nodes x 2 processes")
    for label, shape in (("shaped", shaped), ("unshaped", UNSHAPED)):
        compare_one(shape, cfg, model_path, workdir / label)
    return 0


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)      # unwinds through the context managers' cleanup


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--compare", action="store_true", help="shaped vs unshaped: profile, solve, run two layouts")
    p.add_argument("--profile-only", action="store_true", help="make the cluster, profile it, print the links")
    p.add_argument("--rate-mbit", type=float, default=200.0, help="shaped link rate, Mbit/s")
    p.add_argument("--delay-ms", type=float, default=2.0, help="shaped link delay per end, ms (needs sch_netem)")
    p.add_argument("--unshaped", action="store_true", help="--profile-only on an unshaped link")
    p.add_argument("--model", default=CompareConfig.model)
    p.add_argument("--global-batch", type=int, default=CompareConfig.global_batch)
    p.add_argument("--memory-per-device", default=CompareConfig.memory_per_device)
    p.add_argument("--steps", type=int, default=CompareConfig.steps)
    p.add_argument("--workdir", type=Path, default=Path("emulated-cluster-out"))
    p.add_argument("--allow-lossy", default="", help="with --compare: lossy options the planner may use, "
                                                      "e.g. fp16,powersgd,localsgd")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    reason = unavailable_reason()
    if reason is not None:
        print(f"error: cannot emulate nodes here: {reason}", file=sys.stderr)
        return 2
    shape = UNSHAPED if args.unshaped else LinkShape(rate_mbit=args.rate_mbit, delay_ms=args.delay_ms)
    try:
        if args.compare:
            lossy = tuple(x for x in args.allow_lossy.split(",") if x)
            return compare(shape, CompareConfig(model=args.model, global_batch=args.global_batch,
                                                memory_per_device=args.memory_per_device, steps=args.steps,
                                                allow_lossy=lossy), args.workdir)
        with emulated_cluster(shape) as cluster:
            _say(f"link {shape.describe()}: qdisc '{cluster.qdisc}'; nodes "
                 f"{[(n.netns, n.hostname, n.address) for n in cluster.nodes]}")
            for note in cluster.notes:
                _say(f"note: {note}")
            args.workdir.mkdir(parents=True, exist_ok=True)
            out = args.workdir / "cluster.json"
            profile_across_nodes(cluster, out.resolve(), memory_per_device=args.memory_per_device)
            for f in link_figures(out):
                _say(f"{f.link_class:<10} {f.op:<10} g={f.group_size}: latency {f.latency_s * 1e6:9.1f} us, "
                     f"bandwidth {f.bandwidth_bytes_per_s / 1e6:9.1f} MB/s")
        return 0
    except EmulationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
