r"""Placement ILP: which layers go on which pipeline chunk, for one fixed outer layout.

Given the layer graph G = (L, E) in topological order, S = pp*vp chunks (chunk j runs on pipeline
rank j mod pp) and the per-layer coefficients of ``coefficients.py`` (c_l per micro-batch time, dp_l,
opt_l per-step times, static_l / act_l / out_l bytes, p2p_l send time), write q(j) for the sum of a
coefficient q over the layers of chunk j and q(b) for its sum over the sources of the edges that
cross boundary b | b+1. Then::

    minimise   (m - 1) * T + sum_r tau_r + D + O              vp = 1
               m * T + (pp - 1) * C + D + O                   vp > 1 (interleaved)

    bottleneck_r   T >= tau_r,     tau_r = sum_{j in r} ( c(j) + p2p(j) )          (p2p(j): boundary j)
    chunk_j        C >= c(j) + p2p(j)                                             (vp > 1 only)
    dp_sync_r      D >= sum_{j in r} dp(j)
    optimizer_r    O >= sum_{j in r} opt(j)
    memory_r_k     sum_{j in r} static(j) + sum_i n_k,i * (act + held)(chunk r + i*pp)
                   - sum_{i: g_k,i = 0} late(chunk r + i*pp)
                   + sum_{b: b mod pp = r} buf(b) + sum_{b: (b+1) mod pp = r} buf(b) + workspace <= M
                   for every moment k of rank r that can be its peak (schedules.memory_moments: n_k,i
                   micro-batches in flight on local chunk i, g_k,i = 1 once chunk i has run a backward;
                   late = the gradients backward makes, LayerCost.late_grad_bytes, 0 but in autoplan's
                   executor with a pipeline; without them one vector (1), (m) or (min(m, pp-r)) without
                   interleaving); held(j) = held_out(j) for j < S-1 (what chunk j sends), the model
                   outputs' for j = S-1 (S > 1), plan/memory.py

which is exactly ``cost.evaluate``'s step time and memory for the placement, so the optimum is the
best placement under the cost model (tests check it against brute force). Two formulations supply
q(j) and q(b):

**Assignment** (any DAG). x[l,j] in {0,1}; A[l,b] = sum_{k<=b} x[l,k]; an edge e = (u,v) crosses
boundary b iff X[e,b] = A[u,b] - A[v,b] = 1::

    assign_l     sum_j x[l,j] = 1
    nonempty_j   sum_l x[l,j] >= 1
    order_e_b    A[v,b] <= A[u,b]          (no layer on an earlier chunk than a predecessor)
    q(j) = sum_l q_l x[l,j],   q(b) = sum_e q_u X[e,b]

**Cuts** (a chain; identical consecutive layers tied together). Group the chain into runs of
identical layers, run r = layers [s_r, e_r) with per-layer value q_r. Boundary b cuts after k_b
layers; y[b,r] in {0,1} says the layer before the cut is in run r, o[b,r] in {0..len_r-1} is the
offset inside it::

    one_run_b    sum_r y[b,r] = 1
    offset_b_r   o[b,r] <= (len_r - 1) * y[b,r]
    k_b          = sum_r ( (s_r + 1) * y[b,r] + o[b,r] )
    increasing_b k_b >= k_{b-1} + 1              (non-empty chunks; k_{-1} = 0, k_{S-1} = L)
    Q(k_b)       = sum_r ( Q(s_r + 1) * y[b,r] + q_r * o[b,r] )      (prefix sums, exact)
    q(j) = Q(k_j) - Q(k_{j-1}),   q(b) = sum_r q_r y[b,r]

The cuts model has 2*R*(S-1) variables whatever the depth (R = 3 runs for embed, blocks, head),
which is what lets a 96-block model be split 64 ways in well under a second. With
``objective="memory"`` both minimise the largest per-device memory Z instead (memory_r: Z >= ...).

**Tied** (a chain ``first, N identical blocks, last``). A rank's time and memory depend only on
how many blocks it holds, so the variables aggregate the identical blocks: n[r,c] in {0..N} blocks
on rank r recomputed with mode c (one mode, or each of none/selective/full when the ILP chooses
recompute per block), z0 (chunk 0 holds only the first layer), z1 (chunk S-1 only the last), u
(some block is fully recomputed). With n[r] = sum_c n[r,c] and q_c a block's coefficient in mode c::

    blocks        sum_{r,c} n[r,c] = N
    nonempty_r    n[r] >= vp - z0*[r = 0] - z1*[r = pp-1]          (none when S = 1)
    alone_0/1     (vp = 1 only) n[0] <= N*(1 - z0),  n[pp-1] <= N*(1 - z1)
    full_used     sum_r n[r,full] <= N*u      (u adds the full-recompute workspace on every rank)
    q(r)          = sum_c q_c n[r,c] + [r = 0]*q_first + [r = pp-1]*q_last
    boundaries    each sends a block's output; boundary 0 the first layer's when z0
    symmetry_r    n[r] >= n[r+1] for interchangeable neighbours (same in-flight count, no
                  first/last layer, no boundary 0: GPipe's middle ranks)
    relax_*       T >= T*, sum_r tau_r >= S*, D >= D*, O >= O*    (tied.py's per-rank relaxation:
                  integer-exact per rank, so the LP bound starts where the block counts allow)
    cap_r         n[r] <= cap_r    (with an incumbent U: no solution better than U exceeds it)

With interleaving (vp > 1) the chunks' own counts nc[j,c] are variables too (n[r,c] = sum of
nc[j,c] over rank r's chunks; nonempty and alone per chunk), giving C >= c(j) + p2p(j) and the
in-flight memory vectors exactly; the rank-level memory row of an even spread stays as well,
which keeps tied.py's relaxation a relaxation. One more valid cut, since the LP alone spreads a
rank's blocks evenly (C >= n[r]/vp blocks) and branching closes that one chunk at a time::

    fullest       K >= nc[j] for every chunk j (nc[j] = sum_c nc[j,c]), K integer,
                  C >= t_min * K + min_j f_j      (t_min the fastest mode's block time, f_j chunk j's
                                                   fixed time: first/last layer, send, z0 at its least)

Any n, z (nc) satisfying these is a placement, so the optimum equals the assignment and cut
formulations' (tests check all three and the per-block modes against brute force).

**Ties** (interleaved, time objective). The pipeline term sees only the slowest chunk, so many
placements share the optimum (which chunk holds an extra block). A second stage holds the
objective at the optimum found and minimises sum_r (hi_r - lo_r), lo_r <= nc[j] <= hi_r over
rank r's chunks (integers): the most even chunks, chosen by a rule and not by where the solver
happened to stop.

**Solvers.** pulp drives HiGHS (``highspy``, in-process) or CBC (a subprocess per ILP, shipped
with pulp); ``auto`` takes HiGHS when installed: on every problem measured it was faster
(benchmarks/solve_scaling.py; a tied ILP takes milliseconds where CBC's process start alone takes
about 30 ms). With an incumbent (cutoff) the status "cutoff" says no solution beats it. Both stop
after :func:`node_limit` branch-and-bound nodes (per stage, :data:`NODES_PER_S` per second of the time
limit), a rule that gives the same answer on any machine; the wall-clock ``time_limit_s`` is a
backstop behind it, and
``PlacementResult.stopped_by`` says which limit, if any, ended a solve.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, fields

import networkx as nx
import pulp

from autoplan.errors import InputError
from autoplan.plan.coefficients import LayerCost
from autoplan.plan.memory import transient_bytes
from autoplan.plan.schedules import grads_at_inflight_peak, inflight_floor, inflight_microbatches, memory_moments
from autoplan.profile.hardware import GIB
from autoplan.plan.graph import is_chain
from autoplan.plan.plan import Layout
from autoplan.plan.tied import MODE_ORDER, TIME_ATTRS, TiedChain

try:
    import highspy
except ImportError:        # HiGHS is optional: CBC (inside pulp) is the fallback
    highspy = None

# LayerCost fields that enter the ILP (the numbers; fsdp_unit, a label, only through the workspace)
_COEFFS = tuple(f.name for f in fields(LayerCost) if f.type not in ("str", str))


NODES_PER_S = 50
"""branch-and-bound nodes a solve may take per second of its time limit (:func:`node_limit`).
Measured on these ILPs on one core: 275 (pp 16, vp 4, per-block recompute) to 500 (the 576-GPU
Llama 3.1 405B run: 108 nodes to its optimum) nodes per CPU second, so the node limit stops a
solve before the clock does unless the machine runs it 5-10 times slower than an idle core."""

TIE_LEVEL_REL = 1e-6
"""the tie-break stage keeps the objective within this fraction of the optimum: placements that
differ by rounding in the costs' last digits are ties (CBC and HiGHS found optima 1e-8 apart on the
576-GPU Llama 3.1 405B run; a 1e-9 level let CBC keep an uneven placement), while any real difference
(a block's time is 1e-3 of a step or more) is not"""


def node_limit(time_limit_s: float) -> int:
    """Nodes after which either solver stops (each stage of a solve): the stopping rule that does
    not depend on the machine's load; the wall-clock ``time_limit_s`` is a backstop behind it
    (``PlacementResult.stopped_by`` says which stopped a solve)."""
    return max(1, math.ceil(NODES_PER_S * time_limit_s))


@dataclass
class PlacementResult:
    status: str
    """optimal | feasible (a node or time limit hit with a solution) | timeout (hit with none) |
    infeasible | cutoff (no solution beats the incumbent; bound = the incumbent)"""
    stages: list[list[str]]
    objective: float
    """predicted step time (s), or peak memory (bytes) with objective='memory'"""
    bound: float
    """a proven lower bound on the objective"""
    wall_s: float
    recompute_layers: dict[str, str] | None = None
    """per-layer recompute modes, when the ILP chose them"""
    stopped_by: str | None = None
    """"nodes" (:func:`node_limit`: the same answer on any machine) or "time" (the wall-clock
    backstop: the answer may depend on the machine's load) when a limit ended the solve (either
    stage) early"""


def _cbc(time_limit_s: float | None, gap_rel: float | None, nodes: int | None = None) -> pulp.LpSolver:
    """The CBC binary that ships inside pulp (pulp 3 marks the class deprecated in favour of a
    separately installed CBC; the bundled one is what every machine here has), stopping after
    ``nodes`` branch-and-bound nodes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        kw = {"msg": False} if nodes is None else {"msg": False, "maxNodes": nodes}
        if time_limit_s is not None:
            kw["timeLimit"] = max(1, int(math.ceil(time_limit_s)))
        if gap_rel is not None:
            kw["gapRel"] = gap_rel
        return pulp.PULP_CBC_CMD(**kw)


class _HiGHS(pulp.HiGHS):
    """pulp's HiGHS, also when a node limit stopped it (``kSolutionLimit``, a status pulp 3.3
    has no entry for: it assigns the values, then raises KeyError)."""

    def findSolutionValues(self, lp):
        try:
            return super().findSolutionValues(lp)
        except KeyError:
            if lp.solverModel.getModelStatus() != highspy.HighsModelStatus.kSolutionLimit:
                raise
            has_solution = lp.solverModel.getInfo().primal_solution_status == 2
            return pulp.LpStatusNotSolved, (pulp.LpSolutionIntegerFeasible if has_solution
                                            else pulp.LpSolutionNoSolutionFound)


SOLVERS = ("auto", "highs", "cbc")


def resolve_solver(name: str) -> str:
    """``auto`` is HiGHS when highspy is installed (in-process, no subprocess per ILP: faster on
    every problem measured, benchmarks/solve_scaling.py), else CBC."""
    if name not in SOLVERS:
        raise InputError(f"unknown ILP solver {name!r} (known: {', '.join(SOLVERS)})")
    if name == "auto":
        return "highs" if highspy is not None else "cbc"
    if name == "highs" and highspy is None:
        raise InputError("the HiGHS solver needs the highspy package (pip install highspy); --solver cbc needs nothing")
    return name


_HIGHS_BANNER_SILENCED = False


def _silence_highs_banner() -> None:
    """HiGHS prints its banner to the C-level stdout the first time a solver is made in a
    process, which would corrupt ``--json`` output: make that first one with stdout closed."""
    global _HIGHS_BANNER_SILENCED
    if _HIGHS_BANNER_SILENCED:
        return
    _HIGHS_BANNER_SILENCED = True
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:            # no file descriptor 1 (an embedding host): nothing to protect
        highspy.Highs()
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class PlacementILP:
    """Shared objective and constraint families; subclasses supply q(j), q(b) and the stages."""

    def __init__(self, graph: nx.DiGraph, layout: Layout, memory_bytes: float, *, objective: str = "time",
                 mode_costs: dict[str, dict[str, LayerCost]] | None = None, incumbent: float | None = None):
        self.g = graph
        self.incumbent = incumbent
        """objective value to beat (cutoff): solutions no better are not wanted"""
        self.hopeless: str | None = None
        """set when the formulation proves before solving that it is infeasible or cut off"""
        self.stopped_by: str | None = None
        """which limit ended the last solve early ("nodes", "time"), or None"""
        self.mode_costs = mode_costs
        self.layout = layout
        self.order = sorted(graph.nodes, key=lambda n: graph.nodes[n]["index"])
        self.cost: dict[str, LayerCost] = {n: graph.nodes[n]["cost"] for n in self.order}
        self.p, self.v, self.m = layout.pp, layout.vp, layout.num_microbatches
        self.S = self.p * self.v
        if self.S > len(self.order):
            raise ValueError("more chunks than layers")
        self.M = memory_bytes
        self.objective = objective
        self.prob = pulp.LpProblem("placement", pulp.LpMinimize)
        self.var = self.prob.add_variable
        self.T = self.var("T_bottleneck_s", 0)
        self.D = self.var("D_dp_sync_s", 0)
        self.O = self.var("O_optimizer_s", 0)
        self.Z = self.var("Z_peak_memory_GiB", 0)
        self.C = self.var("C_slowest_chunk_s", 0) if self.v > 1 else None
        outputs = [n for n in self.order if graph.out_degree(n) == 0]
        self.extra = transient_bytes(self.cost, layout, without=outputs)
        self.extra_last = transient_bytes(self.cost, layout) - self.extra
        """workspace of every rank, and what the last rank adds (its logits' gradient)"""
        self.tau: dict[int, pulp.LpAffineExpression] = {}
        self.add_structure()
        self.add_bottleneck()
        self.add_chunks()
        self.add_dp_sync()
        self.add_optimizer()
        self.add_memory()
        self.set_objective()
        self.add_bounds()

    # -- supplied by the formulation -----------------------------------------------------
    def add_structure(self) -> None:
        raise NotImplementedError

    def chunk_sum(self, j: int, attr: str):
        """q(j): the sum of coefficient ``attr`` over the layers of chunk j."""
        raise NotImplementedError

    def boundary_sum(self, b: int, attr: str):
        """q(b): the sum of ``attr`` over the sources of edges crossing boundary b | b+1."""
        raise NotImplementedError

    def stages(self) -> list[list[str]]:
        raise NotImplementedError

    def add_bounds(self) -> None:
        """Valid cuts known before solving (the tied formulation adds its relaxation's)."""

    def relaxation_bound(self) -> float:
        """A lower bound on the objective known without solving (0 if none)."""
        return 0.0

    # -- per-rank sums (the tied formulation overrides these) -----------------------------
    def chunks_of(self, r: int) -> list[int]:
        return [j for j in range(self.S) if j % self.p == r]

    def rank_sum(self, r: int, attr: str):
        """Sum of ``attr`` over the layers of every chunk of pipeline rank r."""
        return pulp.lpSum(self.chunk_sum(j, attr) for j in self.chunks_of(r))

    def rank_send(self, r: int, attr: str):
        """Sum of ``attr`` over the boundaries rank r sends across (b mod pp = r)."""
        return pulp.lpSum(self.boundary_sum(b, attr) for b in range(self.S - 1) if b % self.p == r)

    def rank_recv(self, r: int, attr: str):
        """Sum of ``attr`` over the boundaries rank r receives across ((b+1) mod pp = r)."""
        return pulp.lpSum(self.boundary_sum(b, attr) for b in range(self.S - 1) if (b + 1) % self.p == r)

    # -- shared constraint families ------------------------------------------------------
    def add_bottleneck(self) -> None:
        for r in range(self.p):
            self.tau[r] = (self.rank_sum(r, "compute_s") + self.rank_sum(r, "recompute_s")
                           + self.rank_sum(r, "tp_comm_s") + self.rank_sum(r, "cp_comm_s")
                           + self.rank_send(r, "p2p_s"))
            self.prob += self.T >= self.tau[r], f"bottleneck_r{r}"

    def chunk_time(self, j: int):
        """c(j) + p2p(j): chunk j's time per micro-batch with the send after it."""
        t = pulp.lpSum(self.chunk_sum(j, a) for a in TIME_ATTRS)
        return t + self.boundary_sum(j, "p2p_s") if j < self.S - 1 else t

    def add_chunks(self) -> None:
        """chunk_j: C bounds every chunk (interleaved schedules only)."""
        if self.C is None:
            return
        for j in range(self.S):
            self.prob += self.C >= self.chunk_time(j), f"chunk_{j}"

    def add_dp_sync(self) -> None:
        for r in range(self.p):
            self.prob += self.D >= self.rank_sum(r, "dp_sync_s"), f"dp_sync_r{r}"

    def add_optimizer(self) -> None:
        for r in range(self.p):
            self.prob += self.O >= self.rank_sum(r, "optimizer_s"), f"optimizer_r{r}"

    def memory_fixed(self, r: int):
        """Rank r's memory apart from activations: state, boundary buffers, workspace."""
        return (self.rank_sum(r, "static_bytes") + self.rank_send(r, "buffer_bytes") + self.rank_recv(r, "buffer_bytes")
                + self.extra + (self.extra_last if r == self.p - 1 else 0.0))

    def chunk_inflight(self, j: int):
        """act(j) + held(j): what chunk j keeps per in-flight micro-batch, its activations and the
        outputs it holds until their backward (:func:`autoplan.plan.memory.chunk_held_bytes`: the
        tensors it sends across boundary j; the last chunk of a pipeline the model's outputs)."""
        held = 0.0
        if j < self.S - 1:
            held = self.boundary_sum(j, "held_out_bytes")
        elif self.S > 1:
            held = sum(self.cost[n].held_out_bytes for n in self.order if self.g.out_degree(n) == 0)
        return self.chunk_sum(j, "act_bytes") + held

    def memory_exprs(self, r: int) -> list:
        """Rank r's memory at each moment that can be its peak: one expression per moment (n_i
        micro-batches of local chunk i, g_i whether chunk i has made its gradients,
        :func:`autoplan.plan.schedules.memory_moments`)."""
        def expr(held: tuple[int, ...], grads: tuple[int, ...]):
            out = self.memory_fixed(r) + pulp.lpSum(n * self.chunk_inflight(r + i * self.p) for i, n in enumerate(held) if n)
            unmade = [self.chunk_sum(r + i * self.p, "late_grad_bytes") for i, g in enumerate(grads) if not g]
            return out - pulp.lpSum(unmade) if unmade else out
        return [expr(held, grads) for held, grads in memory_moments(self.layout, r, self.late_grads)]

    @property
    def late_grads(self) -> bool:
        """Whether some layer's gradients are made by its first backward (``LayerCost.late_grad_bytes``)."""
        return any(c.late_grad_bytes for c in self.cost.values())

    def add_memory(self) -> None:
        # rows are scaled to units of GiB: byte-sized coefficients (1e10) next to second-sized ones
        # (1e-3) make CBC's heuristics miss integer solutions
        for r in range(self.p):
            for k, expr in enumerate(self.memory_exprs(r)):
                if self.objective == "memory":
                    self.prob += self.Z >= expr * (1.0 / GIB), f"memory_r{r}_{k}"
                else:
                    self.prob += expr * (1.0 / GIB) <= self.M / GIB, f"memory_r{r}_{k}"

    def set_objective(self) -> None:
        if self.objective == "memory":
            self.prob += self.Z
        else:
            self.prob += self.pipeline_expr() + self.D + self.O

    def pipeline_expr(self):
        """The pipeline term of ``cost.pipeline_s``."""
        if self.C is None:
            return (self.m - 1) * self.T + pulp.lpSum(self.tau.values())
        return self.m * self.T + (self.p - 1) * self.C

    # -- solving -------------------------------------------------------------------------
    def solve(self, time_limit_s: float = 10.0, gap_rel: float = 1e-6, solver: str = "auto") -> PlacementResult:
        """Solve with HiGHS or CBC (``solver``: auto | highs | cbc; auto is HiGHS when highspy is
        installed). With an incumbent, status "cutoff" says no solution beats it."""
        t0 = time.perf_counter()
        scale = GIB if self.objective == "memory" else 1.0
        if self.hopeless:
            bound = self.incumbent if self.hopeless == "cutoff" else math.inf
            return PlacementResult(self.hopeless, [], math.inf, bound, time.perf_counter() - t0)
        kind = resolve_solver(solver)
        run = self._run_highs if kind == "highs" else self._run_cbc
        self.stopped_by = None
        nodes = node_limit(time_limit_s)
        state, solver_bound = run(time_limit_s, gap_rel, nodes)
        obj = float(pulp.value(self.prob.objective)) * scale if state in ("optimal", "feasible") else math.inf
        if state in ("optimal", "feasible") and (self.incumbent is None or obj <= self.incumbent * (1 + 1e-9)):
            self._break_ties(run, obj / scale, time_limit_s - (time.perf_counter() - t0), gap_rel, nodes)
        wall = time.perf_counter() - t0
        bound = max(solver_bound * scale, self.relaxation_bound())
        if self.incumbent is not None and obj > self.incumbent * (1 + 1e-9):
            # nothing better than the incumbent was found (HiGHS takes objective_bound as a hint:
            # its presolve may still return a worse optimum)
            if state in ("optimal", "infeasible") or bound >= self.incumbent:
                return PlacementResult("cutoff", [], math.inf, self.incumbent, wall)
            return PlacementResult("timeout", [], math.inf, bound, wall, stopped_by=self.stopped_by)
        if state in ("infeasible", "timeout"):
            return PlacementResult(state, [], math.inf, math.inf if state == "infeasible" else bound, wall,
                                   stopped_by=self.stopped_by)
        stages = self.stages()                      # read the solution before any other solve
        modes = self.recompute_layers(stages)
        return PlacementResult(state, stages, obj, obj if state == "optimal" else min(obj, bound), wall,
                               recompute_layers=modes, stopped_by=self.stopped_by)

    def tie_break(self):
        """A second objective, minimised among the placements as good as the optimum (None: none)."""
        return None

    def _break_ties(self, run, optimum: float, time_left_s: float, gap_rel: float, nodes: int) -> None:
        """Lexicographic second stage: with the objective held at ``optimum`` (within
        :data:`TIE_LEVEL_REL`), minimise
        :meth:`tie_break`. Equal-cost placements are then chosen by a rule, not by where the
        solver happened to be when it proved the optimum. Keeps the first stage's solution when the
        second finds none; the problem's objective is the first one again afterwards (the level row
        stays: the problem is not solved again)."""
        second = self.tie_break()
        if second is None or time_left_s <= 0:
            return
        first = self.prob.objective
        kept = {v.name: v.value() for v in self.prob.variables()}
        self.prob += first <= optimum + TIE_LEVEL_REL * abs(optimum), "tie_break_level"
        self.prob.setObjective(second)
        try:
            state, _ = run(time_left_s, gap_rel, nodes, cutoff=False)
        finally:
            self.prob.setObjective(first)
        if state not in ("optimal", "feasible"):
            for v in self.prob.variables():
                v.varValue = kept.get(v.name)

    def _cutoff(self) -> float | None:
        if self.incumbent is None:
            return None
        return self.incumbent * (1 + 1e-9) / (GIB if self.objective == "memory" else 1.0)

    def _run_cbc(self, time_limit_s: float, gap_rel: float, nodes: int, cutoff: bool = True) -> tuple[str, float]:
        """(optimal | feasible | timeout | infeasible, bound in objective units). ``cutoff``: beat the
        incumbent (off for the tie-break stage, whose objective is another)."""
        beat = self._cutoff() if cutoff else None
        if beat is not None:       # CBC through pulp takes no cutoff: a row instead
            self.prob += self.prob.objective <= beat, "cutoff"
        t0 = time.perf_counter()
        self.prob.solve(_cbc(time_limit_s, gap_rel, nodes))
        if self.prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            return "infeasible", math.inf
        if self.prob.sol_status == pulp.LpSolutionOptimal and pulp.LpStatus[self.prob.status] == "Optimal":
            return "optimal", -math.inf
        # stopped early; pulp does not say by which limit (CBC's time limit is whole seconds)
        self.stopped_by = "time" if time.perf_counter() - t0 >= 0.99 * math.ceil(time_limit_s) else "nodes"
        if any(v.cat == pulp.LpInteger and abs((v.value() or 0) - round(v.value() or 0)) > 1e-6
               for v in self.prob.variables()):
            # CBC stopped at a limit before finding an integer solution
            return "timeout", self._lp_bound()
        values = {v.name: v.value() for v in self.prob.variables()}
        bound = self._lp_bound()
        for v in self.prob.variables():      # the relaxation overwrote them: restore the solution
            v.varValue = values[v.name]
        return "feasible", bound

    def _run_highs(self, time_limit_s: float, gap_rel: float, nodes: int, cutoff: bool = True) -> tuple[str, float]:
        """(optimal | feasible | timeout | infeasible, HiGHS's dual bound in objective units).
        ``cutoff``: beat the incumbent (off for the tie-break stage)."""
        _silence_highs_banner()
        beat = self._cutoff() if cutoff else None
        kw = {} if beat is None else {"objective_bound": beat}
        self.prob.solve(_HiGHS(msg=False, timeLimit=time_limit_s, gapRel=gap_rel, threads=1,
                               mip_max_nodes=nodes, **kw))
        h = self.prob.solverModel
        info = h.getInfo()
        status = h.getModelStatus()
        has_solution = info.primal_solution_status == 2          # kSolutionStatusFeasible
        if status == highspy.HighsModelStatus.kOptimal and has_solution:
            return "optimal", -math.inf
        if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return "infeasible", math.inf
        if status == highspy.HighsModelStatus.kSolutionLimit:    # mip_max_nodes
            self.stopped_by = "nodes"
        elif status == highspy.HighsModelStatus.kTimeLimit:
            self.stopped_by = "time"
        if not has_solution:
            if status == highspy.HighsModelStatus.kObjectiveBound:
                return "infeasible", math.inf
            return "timeout", float(info.mip_dual_bound)
        return "feasible", float(info.mip_dual_bound)

    def recompute_layers(self, stages: list[list[str]]) -> dict[str, str] | None:
        """Per-layer modes, for formulations that choose them."""
        return None

    def _lp_bound(self) -> float:
        """The LP relaxation's optimum: a valid lower bound when CBC stopped at its time limit.
        (Solves this problem relaxed, then restores the variables' kinds; their values are the
        relaxation's afterwards.)"""
        cats = {v.name: v.cat for v in self.prob.variables()}
        for var in self.prob.variables():
            var.cat = pulp.LpContinuous
        try:
            self.prob.solve(_cbc(None, None))
            if self.prob.sol_status != pulp.LpSolutionOptimal:
                return math.inf        # the relaxation is infeasible (with a cutoff row: nothing beats it)
            return float(pulp.value(self.prob.objective))
        finally:
            for var in self.prob.variables():
                var.cat = cats[var.name]


class AssignmentILP(PlacementILP):
    """x[l,j] per layer and chunk: any DAG."""

    def add_structure(self) -> None:
        self._idx = {n: i for i, n in enumerate(self.order)}
        self.x = {(n, j): self.var(f"x_{self._idx[n]}_{j}", 0, 1, cat=pulp.LpInteger)
                  for n in self.order for j in range(self.S)}
        self.edges = list(self.g.edges)
        if is_chain(self.g):   # chunk j needs j layers before it and S-1-j after it
            L = len(self.order)
            for i, n in enumerate(self.order):
                for j in range(self.S):
                    if j > i or j < i - (L - self.S):
                        self.x[n, j].upBound = 0
        for n in self.order:
            self.prob += pulp.lpSum(self.x[n, j] for j in range(self.S)) == 1, f"assign_{self._idx[n]}"
        for j in range(self.S):
            self.prob += pulp.lpSum(self.x[n, j] for n in self.order) >= 1, f"nonempty_{j}"
        for k, (u, v) in enumerate(self.edges):
            for b in range(self.S - 1):
                self.prob += self.A(v, b) <= self.A(u, b), f"order_e{k}_b{b}"

    def A(self, n: str, b: int):
        return pulp.lpSum(self.x[n, k] for k in range(b + 1))

    def chunk_sum(self, j: int, attr: str):
        return pulp.lpSum(getattr(self.cost[n], attr) * self.x[n, j] for n in self.order)

    def boundary_sum(self, b: int, attr: str):
        return pulp.lpSum(getattr(self.cost[u], attr) * (self.A(u, b) - self.A(v, b)) for u, v in self.edges)

    def stages(self) -> list[list[str]]:
        return [[n for n in self.order if (self.x[n, j].value() or 0) > 0.5] for j in range(self.S)]


class CutILP(PlacementILP):
    """Cut positions on a chain, with runs of identical layers tied together."""

    def add_structure(self) -> None:
        if not is_chain(self.g):
            raise ValueError("CutILP needs a chain")
        L = len(self.order)
        coeffs = [tuple(getattr(self.cost[n], a) for a in _COEFFS) for n in self.order]
        self.runs: list[tuple[int, int]] = []          # [start, end) of each run of identical layers
        for i in range(L):
            if i and coeffs[i] == coeffs[i - 1]:
                self.runs[-1] = (self.runs[-1][0], i + 1)
            else:
                self.runs.append((i, i + 1))
        # a cut after k layers (1 <= k <= L-1) has its previous layer k-1 in a run r with s_r+1 <= k <= e_r
        self.cut_runs = [r for r, (s, e) in enumerate(self.runs) if s + 1 <= L - 1]
        self.prefix = {a: [0.0] for a in _COEFFS}
        for n in self.order:
            for a in _COEFFS:
                self.prefix[a].append(self.prefix[a][-1] + getattr(self.cost[n], a))
        self.y, self.o, self.k = {}, {}, {}
        for b in range(self.S - 1):
            for r in self.cut_runs:
                s, e = self.runs[r]
                top = min(e, L - 1) - (s + 1)          # largest offset inside the run
                self.y[b, r] = self.var(f"y_{b}_{r}", 0, 1, cat=pulp.LpInteger)
                self.o[b, r] = self.var(f"o_{b}_{r}", 0, top, cat=pulp.LpInteger)
                self.prob += self.o[b, r] <= top * self.y[b, r], f"offset_b{b}_r{r}"
            self.prob += pulp.lpSum(self.y[b, r] for r in self.cut_runs) == 1, f"one_run_b{b}"
            self.k[b] = pulp.lpSum((self.runs[r][0] + 1) * self.y[b, r] + self.o[b, r] for r in self.cut_runs)
        for b in range(self.S - 1):
            prev = self.k[b - 1] if b > 0 else 0
            self.prob += self.k[b] >= prev + 1, f"increasing_b{b}"
        self.prob += self.k[self.S - 2] <= L - 1, "last_nonempty"

    def _per_layer(self, r: int, attr: str) -> float:
        return getattr(self.cost[self.order[self.runs[r][0]]], attr)

    def Q(self, b: int, attr: str):
        """Prefix sum of ``attr`` over the layers before cut b (b = -1: none; b = S-1: all)."""
        if b < 0:
            return 0.0
        if b == self.S - 1:
            return self.prefix[attr][-1]
        return pulp.lpSum(self.prefix[attr][self.runs[r][0] + 1] * self.y[b, r]
                          + self._per_layer(r, attr) * self.o[b, r] for r in self.cut_runs)

    def chunk_sum(self, j: int, attr: str):
        return self.Q(j, attr) - self.Q(j - 1, attr)

    def boundary_sum(self, b: int, attr: str):
        return pulp.lpSum(self._per_layer(r, attr) * self.y[b, r] for r in self.cut_runs)

    def stages(self) -> list[list[str]]:
        cuts = [0] + [int(round(pulp.value(self.k[b]))) for b in range(self.S - 1)] + [len(self.order)]
        return [self.order[cuts[j]:cuts[j + 1]] for j in range(self.S)]


class TiedChainILP(PlacementILP):
    """A chain ``first, N identical blocks, last``: only how many blocks each rank holds matters
    (the tied formulation of the module docstring; coefficients from :class:`TiedChain`)."""

    def __init__(self, graph: nx.DiGraph, layout: Layout, memory_bytes: float, *, objective: str = "time",
                 mode_costs: dict[str, dict[str, LayerCost]] | None = None, incumbent: float | None = None,
                 cuts: bool = True, chain: TiedChain | None = None):
        self.use_cuts = cuts
        self.chain = chain
        super().__init__(graph, layout, memory_bytes, objective=objective, mode_costs=mode_costs, incumbent=incumbent)

    @staticmethod
    def applies(order: list[str], cost: dict[str, LayerCost], g: nx.DiGraph) -> bool:
        return is_chain(g) and TiedChainILP.tied_blocks(order, cost)

    @staticmethod
    def tied_blocks(order: list[str], cost: dict[str, LayerCost]) -> bool:
        """At least one layer between the first and the last, all with the same coefficients."""
        if len(order) < 3:
            return False
        mid = [cost[n] for n in order[1:-1]]
        return all(c is mid[0] or c == mid[0] for c in mid)

    def add_structure(self) -> None:
        if not self.applies(self.order, self.cost, self.g):
            raise ValueError("TiedChainILP needs a chain first, N identical layers, last")
        if self.chain is None:
            self.chain = tied_chain(self.order, self.cost, self.layout, self.M, self.mode_costs)
        self.N, self.modes, self.block = self.chain.N, self.chain.modes, self.chain.block
        self.first, self.last = self.chain.first, self.chain.last
        self.n = {(r, c): self.var(f"n_{r}_{c}", 0, self.N, cat=pulp.LpInteger)
                  for r in range(self.p) for c in self.modes}
        self.z0 = self.var("z0_first_alone", 0, 1, cat=pulp.LpInteger)
        self.z1 = self.var("z1_last_alone", 0, 1, cat=pulp.LpInteger)
        self.nc: dict[tuple[int, str], pulp.LpVariable] = {}
        if self.v > 1:      # interleaved: chunk times and memory need each chunk's blocks
            self.nc = {(j, c): self.var(f"nc_{j}_{c}", 0, self.N, cat=pulp.LpInteger)
                       for j in range(self.S) for c in self.modes}
            for r in range(self.p):
                for c in self.modes:
                    self.prob += self.n[r, c] == pulp.lpSum(self.nc[j, c] for j in self.chunks_of(r)), f"chunks_r{r}_{c}"
        self.add_blocks()
        self.add_nonempty()
        self.add_full_used()
        self.add_selective_used()
        self.add_symmetry()

    def add_chunks(self) -> None:
        """chunk_j, and fullest: C is at least the fullest chunk's block count K (an integer) times
        the fastest block, plus the least fixed part of any chunk. Without it the LP spreads a rank's
        blocks evenly over its chunks (C >= n[r]/vp blocks) and branch and bound closes that gap
        one chunk at a time: the 576-GPU Llama 3.1 405B run (pp 9, vp 7, 126 blocks) stopped at
        its 10 s limit 0.8% from its bound."""
        super().add_chunks()
        if self.C is None:
            return
        self.K = self.var("K_fullest_chunk_blocks", 0, self.N, cat=pulp.LpInteger)
        least_fixed = math.inf
        for j in range(self.S):
            self.prob += self.K >= self.n_chunk(j), f"fullest_c{j}"
            t = self.chunk_time(j)      # its fixed part: the first/last layers, the send (z0 at its least)
            least_fixed = min(least_fixed, t.constant + min(0.0, t.get(self.z0, 0.0)))
        fastest = min(self.chain.block_time_s(c) for c in self.modes)
        self.prob += self.C >= fastest * self.K + least_fixed, "fullest"

    def add_blocks(self) -> None:
        """blocks: every block on exactly one rank."""
        self.prob += pulp.lpSum(self.n.values()) == self.N, "blocks"

    def add_nonempty(self) -> None:
        """nonempty_r (every chunk holds a block unless it holds first/last alone), alone_0/1."""
        if self.S == 1:
            self.z0.upBound = self.z1.upBound = 0
            return
        for r in range(self.p):
            need = self.v - (self.z0 if r == 0 else 0) - (self.z1 if r == self.p - 1 else 0)
            self.prob += self.n_rank(r) >= need, f"nonempty_r{r}"
        if self.v == 1:
            self.prob += self.n_rank(0) <= self.N * (1 - self.z0), "alone_0"
            self.prob += self.n_rank(self.p - 1) <= self.N * (1 - self.z1), "alone_1"
            return
        for j in range(self.S):
            need = 1 - (self.z0 if j == 0 else 0) - (self.z1 if j == self.S - 1 else 0)
            self.prob += self.n_chunk(j) >= need, f"nonempty_c{j}"
        self.prob += self.n_chunk(0) <= self.N * (1 - self.z0), "alone_0"
        self.prob += self.n_chunk(self.S - 1) <= self.N * (1 - self.z1), "alone_1"

    def add_full_used(self) -> None:
        """full_used: the full-recompute workspace only if some block is fully recomputed."""
        if not self.chain.full_is_choice:
            self.extra = self.chain.workspace_bytes
            return
        self.u = self.var("u_full_used", 0, 1, cat=pulp.LpInteger)
        self.prob += pulp.lpSum(self.n[r, "full"] for r in range(self.p)) <= self.N * self.u, "full_used"
        self.extra = self.chain.workspace_bytes + self.chain.full_workspace_bytes * self.u

    def add_selective_used(self) -> None:
        """selective_used: the selective workspace (the part of one block's activations its backward
        recomputes) only if some block is selectively recomputed."""
        if not (self.mode_costs and "selective" in self.modes and len(self.modes) > 1):
            return
        self.u_sel = self.var("u_selective_used", 0, 1, cat=pulp.LpInteger)
        self.prob += pulp.lpSum(self.n[r, "selective"] for r in range(self.p)) <= self.N * self.u_sel, \
            "selective_used"
        sel_ws = max(max(0, c.full_act_bytes - c.act_bytes) for c in self.mode_costs["selective"].values())
        self.extra = self.extra + sel_ws * self.u_sel

    def add_symmetry(self) -> None:
        """symmetry_r: interchangeable neighbouring ranks hold non-increasing block counts (not
        interleaved: there each rank's chunks hold different numbers of micro-batches)."""
        if self.v > 1:
            return
        for run in self.chain.symmetric_runs():
            for a, b in zip(run, run[1:]):
                self.prob += self.n_rank(a) >= self.n_rank(b), f"symmetry_r{a}"

    def add_bounds(self) -> None:
        """relax_*: the per-rank relaxation's bounds (tied.py) as valid cuts, and cap_r: block
        counts no solution better than the incumbent exceeds."""
        if self.objective != "time" or not self.use_cuts:
            return
        rel = self.chain.relaxation
        if not rel:
            self.hopeless = "infeasible"      # not even the relaxation fits
            return
        slack = 1 - 1e-9
        self.prob += self.T >= min(cb.T for cb in rel) * slack, "relax_bottleneck"
        self.prob += pulp.lpSum(self.tau.values()) >= min(cb.sum_tau for cb in rel) * slack, "relax_busy"
        self.prob += self.D >= min(cb.D for cb in rel) * slack, "relax_dp_sync"
        self.prob += self.O >= min(cb.O for cb in rel) * slack, "relax_optimizer"
        if self.incumbent is not None:
            caps = self.chain.count_caps(self.incumbent)
            if caps is None:
                self.hopeless = "cutoff"      # nothing beats the incumbent
                return
            for r, cap in enumerate(caps):
                if cap < self.N:
                    self.prob += self.n_rank(r) <= cap, f"cap_r{r}"

    def relaxation_bound(self) -> float:
        return self.chain.lower_bound() if self.objective == "time" else 0.0

    def n_rank(self, r: int):
        return pulp.lpSum(self.n[r, c] for c in self.modes)

    def n_chunk(self, j: int):
        return pulp.lpSum(self.nc[j, c] for c in self.modes)

    def chunk_sum(self, j: int, attr: str):
        """q(j) (interleaved only: chunk counts exist for vp > 1)."""
        fixed = (getattr(self.first, attr) if j == 0 else 0.0) + (getattr(self.last, attr) if j == self.S - 1 else 0.0)
        return pulp.lpSum(getattr(self.block[c], attr) * self.nc[j, c] for c in self.modes) + fixed

    def boundary_sum(self, b: int, attr: str):
        """q(b): a block's output, the first layer's across boundary 0 when z0."""
        blk = getattr(self.block[self.modes[0]], attr)     # buffer_bytes / p2p_s do not depend on the mode
        return blk + (getattr(self.first, attr) - blk) * self.z0 if b == 0 else blk

    def memory_exprs(self, r: int) -> list:
        """Without interleaving, the rank's memory at each moment that can be its peak
        (:func:`autoplan.plan.schedules.memory_moments`; the relaxation of tied.py takes one of
        them). With interleaving, the rank's activations at the peak of an even spread over its
        chunks (:func:`autoplan.plan.schedules.inflight_microbatches`: what the relaxation uses, so
        its bounds stay valid), and each moment on the chunks' own counts as well (what
        ``cost.evaluate`` checks)."""
        held = self.rank_send(r, "held_out_bytes") + (self.last.held_out_bytes if r == self.p - 1 and self.S > 1 else 0.0)

        def row(n_act: float, n_held: float, grads: int):
            expr = self.memory_fixed(r) + n_act * self.rank_sum(r, "act_bytes") + n_held * held
            return expr if grads else expr - self.rank_sum(r, "late_grad_bytes")
        if self.v == 1:
            return [row(n, n, g) for (n,), (g,) in memory_moments(self.layout, r, self.late_grads)]
        rows = [row(inflight_microbatches(self.layout, r), self.chain.held_inflight[r], self.chain.grads_inflight[r])]
        return rows + super().memory_exprs(r)

    def tie_break(self):
        """even_r (interleaved, time objective): the spread of each rank's chunks, hi[r] - lo[r] with
        lo[r] <= n(j) <= hi[r] over its chunks j, summed over ranks; then, below one block of
        spread, sum_j h_j n(j) / (1 + N sum_j h_j) with h_j the most micro-batches chunk j ever
        holds (:func:`autoplan.plan.schedules.memory_moments`). The pipeline term counts only the
        slowest chunk, so once one chunk must hold an extra block the cost model cannot tell
        [2, 2, 3, 2] from [1, 3, 3, 2]; the even one is what the schedule runs best (uneven chunks
        stall its steady state: :func:`autoplan.plan.schedules.pipeline_s`), and the extra block
        goes where it is held for fewest micro-batches (a linear stand-in for the peak memory: the
        peak's own rows made this stage several times the first one's work, as did continuous
        hi/lo; with these it is integral at its root)."""
        if self.C is None or self.objective != "time":
            return None
        spread, held = [], []
        for r in range(self.p):
            hi = self.var(f"even_hi_r{r}", 0, self.N, cat=pulp.LpInteger)
            lo = self.var(f"even_lo_r{r}", 0, self.N, cat=pulp.LpInteger)
            moments = memory_moments(self.layout, r, self.late_grads)
            for i, j in enumerate(self.chunks_of(r)):
                self.prob += hi >= self.n_chunk(j), f"even_hi_c{j}"
                self.prob += lo <= self.n_chunk(j), f"even_lo_c{j}"
                held.append((max(h[i] for h, _ in moments), j))
            spread.append(hi - lo)
        scale = 1.0 / (1 + self.N * sum(h for h, _ in held))
        return pulp.lpSum(spread) + scale * pulp.lpSum(h * self.n_chunk(j) for h, j in held)

    def set_objective(self) -> None:
        super().set_objective()
        # among equal-cost placements prefer chunks that hold blocks (interleaved schedules run
        # best on even chunks): a tie-breaker far below any real cost difference
        eps = 1e-9 * max(min(b.compute_s for b in self.block.values()), 1e-12)
        self.prob.setObjective(self.prob.objective + eps * (self.z0 + self.z1))

    def rank_sum(self, r: int, attr: str):
        return pulp.lpSum(getattr(self.block[c], attr) * self.n[r, c] for c in self.modes) + self.chain.fixed(r, attr)

    def _boundary_total(self, r: int, attr: str, recv: bool):
        const, coef = self.chain.boundary_parts(r, attr, recv)
        return const + coef * self.z0 if coef else const

    def rank_send(self, r: int, attr: str):
        return self._boundary_total(r, attr, recv=False)

    def rank_recv(self, r: int, attr: str):
        return self._boundary_total(r, attr, recv=True)

    def _counts(self, per_chunk: bool = False) -> dict[tuple[int, str], int]:
        return {k: int(round(v.value() or 0)) for k, v in (self.nc if per_chunk else self.n).items()}

    def stages(self) -> list[list[str]]:
        z0 = (self.z0.value() or 0) > 0.5
        z1 = (self.z1.value() or 0) > 0.5
        count = [0] * self.S
        if self.v > 1:
            nc = self._counts(per_chunk=True)
            count = [sum(nc[j, c] for c in self.modes) for j in range(self.S)]
        else:
            n = self._counts()
            for r in range(self.p):
                allowed = [j for j in self.chunks_of(r) if not (j == 0 and z0) and not (j == self.S - 1 and z1)]
                count[allowed[0] if allowed else r] = sum(n[r, c] for c in self.modes)
        blocks = iter(self.order[1:-1])
        out = [[next(blocks) for _ in range(c)] for c in count]
        out[0].insert(0, self.order[0])
        out[-1].append(self.order[-1])
        return out

    def recompute_layers(self, stages: list[list[str]]) -> dict[str, str] | None:
        """Each rank's (interleaved: each chunk's) blocks get its chosen modes (any order within a
        rank or chunk costs the same)."""
        if not self.mode_costs:
            return None
        groups = ([(j, [j]) for j in range(self.S)] if self.v > 1 else
                  [(r, self.chunks_of(r)) for r in range(self.p)])
        n = self._counts(per_chunk=self.v > 1)
        out: dict[str, str] = {}
        for key, chunks in groups:
            mine = [x for j in chunks for x in stages[j] if x not in (self.order[0], self.order[-1])]
            modes = [c for c in self.modes for _ in range(n[key, c])]
            out.update(zip(mine, modes))
        return out


def tied_chain(order: list[str], cost: dict[str, LayerCost], layout: Layout, memory_bytes: float,
               mode_costs: dict[str, dict[str, LayerCost]] | None = None) -> TiedChain:
    """The per-rank coefficients of a tied chain for ``layout`` (with ``mode_costs``: every mode
    a block may take; otherwise the layout's one mode)."""
    mid = order[1]
    if mode_costs:
        modes = tuple(m for m in MODE_ORDER if m in mode_costs)
        block = {m: mode_costs[m][mid] for m in modes}
    else:
        modes = (layout.recompute,)
        block = {layout.recompute: cost[mid]}
    outputs = [order[-1]]        # the chain's output: its largest-output workspace is the last rank's
    if len(modes) > 1:     # the recompute workspaces are the ILP's choice (u, u_sel), not the layout's
        workspace = transient_bytes(cost, layout.with_(recompute="none", recompute_layers={}), without=outputs)
        full_ws = max(c.full_act_bytes for c in cost.values()) if "full" in modes else 0.0
    else:
        workspace, full_ws = transient_bytes(cost, layout, without=outputs), 0.0
    last_ws = transient_bytes(cost, layout) - transient_bytes(cost, layout, without=outputs)
    return TiedChain(p=layout.pp, v=layout.vp, m=layout.num_microbatches, N=len(order) - 2, modes=modes,
                     block=block, first=cost[order[0]], last=cost[order[-1]],
                     inflight=tuple(inflight_microbatches(layout, r) for r in range(layout.pp)),
                     held_inflight=tuple(inflight_floor(layout, r) for r in range(layout.pp)),
                     grads_inflight=tuple(grads_at_inflight_peak(layout, r) for r in range(layout.pp)),
                     memory_bytes=memory_bytes, workspace_bytes=workspace, full_workspace_bytes=full_ws,
                     last_workspace_bytes=last_ws)


def solve_placement(graph: nx.DiGraph, layout: Layout, memory_bytes: float, *, objective: str = "time",
                    time_limit_s: float = 10.0, formulation: str = "auto",
                    mode_costs: dict[str, dict[str, LayerCost]] | None = None, gap_rel: float = 1e-6,
                    solver: str = "auto", incumbent: float | None = None, cuts: bool = True,
                    chain: TiedChain | None = None) -> PlacementResult:
    """Best placement of ``graph``'s layers on ``layout.pp * layout.vp`` chunks.

    ``formulation``: "tied" (chain of first, identical blocks, last), "cuts" (any chain),
    "assignment" (any DAG) or "auto" (the smallest that applies). ``mode_costs`` (recompute mode ->
    per-layer costs) lets the tied formulation choose each block's recompute mode; one chunk is
    then allowed too. ``incumbent``: an objective value to beat; status "cutoff" when nothing
    does. ``cuts``: the tied formulation's relaxation cuts (off only to measure them); ``chain``:
    its coefficients, when the caller has built them already (same layout, memory and modes)."""
    if layout.pp * layout.vp == 1 and not mode_costs:
        raise ValueError("solve_placement needs at least two chunks")
    if mode_costs:
        formulation = "tied"
    if formulation == "auto":
        order = sorted(graph.nodes, key=lambda n: graph.nodes[n]["index"])
        cost = {n: graph.nodes[n]["cost"] for n in order}
        formulation = ("tied" if TiedChainILP.applies(order, cost, graph)
                       else "cuts" if is_chain(graph) else "assignment")
    kw = {"cuts": cuts, "chain": chain} if formulation == "tied" else {}
    cls = {"tied": TiedChainILP, "cuts": CutILP, "assignment": AssignmentILP}[formulation]
    ilp = cls(graph, layout, memory_bytes, objective=objective, mode_costs=mode_costs, incumbent=incumbent, **kw)
    return ilp.solve(time_limit_s, gap_rel, solver)
