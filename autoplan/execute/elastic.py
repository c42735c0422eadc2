"""Elastic training that re-plans itself when nodes leave or come back.

    # on each node (the same command; node 0's host holds the rendezvous)
    autoplan run plan.json --elastic --nnodes 2 --min-nodes 1 --rdzv-endpoint node0:29400 \\
        -- examples/train_gpt.py --steps 1000 --ckpt-dir /shared/ckpt --ckpt-every 20

How it works, on top of torchrun's elastic agent (``torch.distributed.elastic``):

1. Each node runs one agent (this process) with ``--nnodes MIN:MAX`` and a c10d rendezvous. When a
   node is lost (its processes die or its network goes), the collectives of the other nodes' workers
   fail, their agents stop them and go back to the rendezvous. The rendezvous drops the lost node
   once its heartbeats stop (about 15 s), then waits ``rejoin_timeout_s`` for it to come back
   (``last_call_timeout``) before it closes the round with the nodes that remain (at least
   ``min_nodes``). A node that returns in time makes the round whole again: same plan.
2. After every rendezvous, before the workers start (:meth:`ReplanningAgent._start_workers`), the
   agent of group rank 0 re-solves the plan for the devices of the round: the same model profile
   and training (global batch, precision, optimizer, memory budget), the plan's cluster profile
   restricted to the nodes that remain (:func:`autoplan.plan.api.restrict_cluster`, :func:`replan`). It publishes the
   plan in the round's rendezvous store; every agent writes it beside the original plan
   (``plan.world2.json``), passes it to its workers as ``--plan``, and logs one line with the old and
   new layout and predicted step time.
3. The workers start as on a first launch: the training script loads the newest distributed
   checkpoint (DCP reshards it to the new layout, :mod:`autoplan.execute.checkpoint`) and goes on.
   The script must take ``--plan`` and ``--ckpt-dir`` (``examples/train_gpt.py`` does).
4. Growing: a node that joins while the job runs waits in the rendezvous. The agents restart their
   workers for it only once a NEW checkpoint has been written since they saw it waiting
   (:class:`GrowAtCheckpoint`), so little work is redone; then the round re-plans for the larger
   world (the original plan when the job is whole again).

The workers of each round meet in a store of their own (rank 0's worker hosts it), not in the
agent store torchrun shares across rounds by default (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``):
with the shared store, a node joining a running job waits forever for the store address that rank
0's agent published only in its first round (torch 2.13), and the rounds' process-group keys would
meet each other's.

Limits: the node that holds the rendezvous endpoint (and so the workers' store) must survive; the
checkpoint directory must be shared by all nodes; nodes are the unit (a lost GPU inside a node makes
its agent restart the same plan, ``--max-restarts`` times).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Sequence

from autoplan.errors import AutoplanError, InputError, LaunchError
from autoplan.jsonio import write_json_atomic
from autoplan.plan.plan import Plan

STORE_KEY = "autoplan/elastic/plan"
"""key, in the round's rendezvous store, of group rank 0's published plan (or error)"""
REPLAN_TIMEOUT_S = 600
"""how long the other agents wait for group rank 0 to re-solve"""
DEFAULT_REJOIN_TIMEOUT_S = 30.0
DEFAULT_MAX_RESTARTS = 3


# --------------------------------------------------------------------------------------------
# re-planning (pure planner work: no torch.distributed)
# --------------------------------------------------------------------------------------------

def replan(plan: Plan, world_size: int, *, plan_path: Path | None = None) -> Plan:
    """The best plan for ``world_size`` devices of the cluster ``plan`` was made for.

    Same model profile and training (global batch, sequence length, precision, optimizer, memory
    budget); the cluster profile restricted to ``world_size / devices_per_node`` nodes
    (:meth:`~autoplan.plan.api.Problem.from_plan`). Returns ``plan`` itself when the world size is
    the plan's. Raises an AutoplanError when the plan records no profiles to re-solve from or no
    layout fits the devices that remain."""
    from autoplan.plan.api import Problem, beside_plan, resolve_cluster, solve_problem
    from autoplan.plan.search import SearchOptions

    if world_size == plan.layout.world_size:
        return plan
    t = plan.training
    cluster_spec = beside_plan(t.cluster_profile, plan_path) if t.cluster_profile else t.cluster_spec
    if not cluster_spec:
        raise InputError("the plan records no cluster profile or spec: it cannot be re-solved for other devices")
    per_node = resolve_cluster(cluster_spec).devices_per_node
    if world_size % per_node:
        raise LaunchError(f"{world_size} devices are not whole nodes of {per_node} ({cluster_spec}): cannot re-plan")
    new = solve_problem(Problem.from_plan(plan, plan_path=plan_path, num_nodes=world_size // per_node),
                        SearchOptions(), families=False)
    new.training = replace(t, world_size=world_size)
    return new


def world_plan_path(plan_path: Path, world_size: int) -> Path:
    """Where a node writes the plan for ``world_size`` devices: ``plan.world2.json`` beside ``plan.json``."""
    return plan_path.with_name(f"{plan_path.stem}.world{world_size}{plan_path.suffix}")


def describe_replan(old: Plan, new: Plan) -> str:
    """``re-plan: 4 -> 2 devices: dp2 ... 0.052 s/step -> dp1 ... 0.081 s/step``"""
    return (f"re-plan: {old.layout.world_size} -> {new.layout.world_size} devices: {old.layout.short()}, "
            f"predicted {old.predicted.step_time_s:.4f} s/step -> {new.layout.short()}, predicted "
            f"{new.predicted.step_time_s:.4f} s/step")


# --------------------------------------------------------------------------------------------
# the agent
# --------------------------------------------------------------------------------------------

def _replace_arg(args: Sequence[Any], flag: str, value: str) -> list[Any]:
    """``args`` with ``flag VALUE`` (or ``flag=VALUE``) set to ``value`` (appended when absent)."""
    out, i, found = [], 0, False
    args = list(args)
    while i < len(args):
        a = str(args[i])
        if a == flag and i + 1 < len(args):
            out += [flag, value]
            i, found = i + 2, True
            continue
        if a.startswith(flag + "="):
            out.append(f"{flag}={value}")
            i, found = i + 1, True
            continue
        out.append(args[i])
        i += 1
    return out if found else [flag, value, *out]


def script_arg(args: Sequence[str], flag: str) -> str | None:
    """The value of ``flag VALUE`` / ``flag=VALUE`` in a script's arguments, or None."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


class GrowAtCheckpoint:
    """A rendezvous handler whose ``num_nodes_waiting`` reports a waiting node only once the
    checkpoint marker has moved since the node was first seen waiting: the agent's monitor loop
    then restarts the workers (to take the node in) right after a checkpoint, not in the middle of
    the steps that follow it. Everything else is the wrapped handler's."""

    def __init__(self, handler: Any, ckpt_dir: Path):
        self._handler = handler
        self._ckpt_dir = ckpt_dir
        self._seen_at: int | None = None
        """checkpoint step when nodes were first seen waiting (None: nobody waiting)"""

    def _step(self) -> int:
        from autoplan.execute.checkpoint import read_latest
        try:
            latest = read_latest(self._ckpt_dir)
        except AutoplanError:
            return -1
        return -1 if latest is None else latest.step

    def num_nodes_waiting(self) -> int:
        waiting = self._handler.num_nodes_waiting()
        if waiting <= 0:
            self._seen_at = None
            return 0
        if self._seen_at is None:
            self._seen_at = self._step()
            _say(f"{waiting} node(s) waiting to join: growing at the next checkpoint")
            return 0
        if self._step() > self._seen_at:
            self._seen_at = None
            return waiting
        return 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handler, name)


def _say(line: str) -> None:
    print(f"autoplan: {line}", file=sys.stderr, flush=True)


def make_agent_class():
    """:class:`ReplanningAgent`, defined on first use (torch imports stay out of the planner)."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    class ReplanningAgent(LocalElasticAgent):
        """torchrun's local agent, which re-solves the plan for the world of every rendezvous round
        before it starts the workers (module docstring)."""

        def __init__(self, *args: Any, plan_path: Path, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._plan_path = plan_path
            self._original = Plan.load(plan_path)
            self._current = self._original
            self._plans: dict[int, Plan] = {self._original.layout.world_size: self._original}

        def _round_plan(self, worker_group: Any) -> Plan:
            """The plan for this round's world: solved by group rank 0, shared through the round's
            rendezvous store."""
            store = worker_group.store
            world = worker_group.workers[0].world_size
            if worker_group.group_rank == 0:
                payload: dict[str, Any] = {"world": world}
                try:
                    if world not in self._plans:
                        t0 = time.perf_counter()
                        self._plans[world] = replan(self._original, world, plan_path=self._plan_path)
                        _say(f"solved for {world} devices in {time.perf_counter() - t0:.1f} s")
                    payload["plan"] = self._plans[world].to_dict()
                except AutoplanError as e:
                    payload["error"] = str(e).splitlines()[0]
                store.set(STORE_KEY, json.dumps(payload))
            else:
                store.wait([STORE_KEY], timedelta(seconds=REPLAN_TIMEOUT_S))
                payload = json.loads(store.get(STORE_KEY))
            if "error" in payload:
                raise LaunchError(f"no plan for the {world} devices that remain: {payload['error']}")
            plan = Plan.from_dict(payload["plan"], "re-plan")
            self._plans.setdefault(world, plan)
            return plan

        def _start_workers(self, worker_group: Any) -> dict[int, Any]:
            plan = self._round_plan(worker_group)
            path = self._plan_path
            if plan.layout.world_size != self._original.layout.world_size:
                path = world_plan_path(self._plan_path, plan.layout.world_size)
                write_json_atomic(path, plan.to_dict())
            if plan.layout.world_size != self._current.layout.world_size:
                _say(describe_replan(self._current, plan) + f" (plan {path})")
            self._current = plan
            spec = worker_group.spec
            spec.args = tuple(_replace_arg(spec.args, "--plan", str(path)))
            return super()._start_workers(worker_group)

    return ReplanningAgent


def elastic_launch(plan_path: str | os.PathLike, script: str | os.PathLike, args: Sequence[str], *,
                   nnodes: int, min_nodes: int, node_rank: int | None = None, rdzv_endpoint: str | None = None,
                   rdzv_id: str | None = None, rejoin_timeout_s: float = DEFAULT_REJOIN_TIMEOUT_S,
                   max_restarts: int = DEFAULT_MAX_RESTARTS) -> int:
    """Run ``script args`` on ``min_nodes``..``nnodes`` nodes, re-planning on every change of the
    nodes (module docstring); this node's agent runs in this process. Returns the workers' exit code
    (0: every worker finished)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous import registry as rdzv_registry
    from torch.distributed.elastic.agent.server.api import WorkerSpec
    from torch.distributed.run import config_from_args, parse_args

    from autoplan.errors import Interrupted
    from autoplan.execute.launch import check_local_world

    plan_path = Path(plan_path)
    plan = Plan.load(plan_path)
    if not Path(script).is_file():
        raise InputError(f"training script not found: {script}")
    ckpt = script_arg(args, "--ckpt-dir")
    if ckpt is None:
        raise InputError("--elastic resumes from checkpoints after every change of nodes: give the script "
                         "--ckpt-dir DIR (and --ckpt-every K)")
    world = plan.layout.world_size
    if nnodes < 1 or world % nnodes:
        raise LaunchError(f"plan world size {world} does not split over {nnodes} nodes")
    if not 1 <= min_nodes <= nnodes:
        raise LaunchError(f"--min-nodes must be from 1 to --nnodes ({nnodes}), got {min_nodes}")
    if max_restarts < 1:
        raise LaunchError(f"--elastic needs --max-restarts >= 1 (each lost node costs one), got {max_restarts}")
    if not 0 < rejoin_timeout_s <= 86400:
        raise LaunchError(f"--rejoin-timeout must be > 0 and at most 86400 s, got {rejoin_timeout_s}")
    per_node = world // nnodes
    check_local_world(per_node, nnodes)
    endpoint = rdzv_endpoint or "localhost:0"
    if nnodes > 1 and rdzv_endpoint is None:
        raise LaunchError(f"an elastic launch on {nnodes} nodes needs a rendezvous endpoint host:port")
    script_args = _replace_arg(args, "--plan", str(plan_path))
    cmd = [f"--nnodes={min_nodes}:{nnodes}", f"--nproc-per-node={per_node}", "--rdzv-backend=c10d",
           f"--rdzv-endpoint={endpoint}", f"--rdzv-id={rdzv_id or 'autoplan-' + plan_path.stem}",
           f"--rdzv-conf=last_call_timeout={int(rejoin_timeout_s)},join_timeout=600",
           f"--max-restarts={max_restarts}", str(script), *script_args]
    if node_rank is not None:
        cmd.insert(0, f"--node-rank={node_rank}")
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"     # a store per round (module docstring)
    config, entrypoint, entry_args = config_from_args(parse_args(cmd))
    params = RendezvousParameters(backend=config.rdzv_backend, endpoint=config.rdzv_endpoint, run_id=config.run_id,
                                  min_nodes=config.min_nodes, max_nodes=config.max_nodes,
                                  local_addr=config.local_addr, **config.rdzv_configs)
    handler = GrowAtCheckpoint(rdzv_registry.get_rendezvous_handler(params), Path(ckpt))
    spec = WorkerSpec(role=config.role, local_world_size=config.nproc_per_node, entrypoint=entrypoint,
                      args=tuple(entry_args), rdzv_handler=handler, max_restarts=config.max_restarts,
                      monitor_interval=config.monitor_interval, local_addr=config.local_addr)
    os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = config.signals_to_handle
    agent = make_agent_class()(spec=spec, logs_specs=config.logs_specs, start_method=config.start_method,
                               shutdown_timeout=config.shutdown_timeout, plan_path=plan_path)
    shutdown_rdzv = True
    try:
        result = agent.run()
        if result.is_failed():
            raise ChildFailedError(name=str(script), failures=result.failures)
        return 0
    except ChildFailedError as e:
        _, failure = e.get_first_failure()
        return failure.exitcode if failure.exitcode > 0 else 1
    except SignalException as e:
        shutdown_rdzv = False          # the others may go on without this node
        raise Interrupted(int(e.sigval)) from None
    finally:
        if shutdown_rdzv:
            handler.shutdown()
