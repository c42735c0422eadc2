r"""Placement ILP: which layers go on which pipeline chunk, for one fixed outer layout.

Given the layer graph G = (L, E) in topological order, S = pp*vp chunks (chunk j runs on pipeline
rank j mod pp) and the per-layer coefficients of ``cost.py``, solve::

    variables  x[l,j] in {0,1}            layer l on chunk j
               T >= 0                       bottleneck rank time per micro-batch
               D >= 0, O >= 0               slowest rank's DP sync, optimizer step
    prefix     A[l,b] = sum_{k<=b} x[l,k]   (1 if l sits on chunk <= b)
    crossing   X[e,b] = A[u,b] - A[v,b]     (1 if edge e = (u,v) crosses boundary b|b+1)

    minimise   (m - 1/vp) * T + (1/vp) * sum_r tau_r + D + O

    assign_l         sum_j x[l,j] = 1
    nonempty_j       sum_l x[l,j] >= 1
    order_e_b        A[v,b] <= A[u,b]                       for each edge (u,v), boundary b
    bottleneck_r     T >= tau_r
                     tau_r = sum_{j in r} ( sum_l c_l x[l,j] + sum_e p2p_u X[e,j] )
    dp_sync_r        D >= sum_{j in r} sum_l dp_l x[l,j]
    optimizer_r      O >= sum_{j in r} sum_l opt_l x[l,j]
    memory_r         sum_{j in r} sum_l (static_l + inflight_r * act_l) x[l,j]
                     + sum_{b: b mod pp = r} sum_e out_u X[e,b]           (send buffers)
                     + sum_{b: (b+1) mod pp = r} sum_e out_u X[e,b]       (receive buffers)
                     + workspace  <=  M

The objective is exactly ``cost.evaluate``'s step time for the placement x, so the ILP optimum is
the best placement under the cost model (the tests check this against brute force). The order
constraints on prefixes are the tight form of "stage(u) <= stage(v)"; with a chain they make
every chunk a contiguous run of layers. With ``objective="memory"`` the ILP instead minimises the
largest per-device memory Z (memory_r becomes Z >= ...), used to say what the smallest layout
needs when nothing fits.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import networkx as nx
import pulp

from autoplan.plan.cost import LayerCost, inflight_microbatches, transient_bytes
from autoplan.plan.plan import Layout


@dataclass
class PlacementResult:
    status: str
    """optimal | feasible (time limit hit with a solution) | infeasible"""
    stages: list[list[str]]
    objective: float
    """predicted step time (s), or peak memory (bytes) with objective='memory'"""
    bound: float
    """a proven lower bound on the objective"""
    wall_s: float


def _cbc(time_limit_s: float | None, gap_rel: float | None) -> pulp.LpSolver:
    """The CBC binary that ships inside pulp (pulp 3 marks the class deprecated in favour of a
    separately installed CBC; the bundled one is what every machine here has)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        kw = {"msg": False}
        if time_limit_s is not None:
            kw["timeLimit"] = max(1, int(math.ceil(time_limit_s)))
        if gap_rel is not None:
            kw["gapRel"] = gap_rel
        return pulp.PULP_CBC_CMD(**kw)


class PlacementILP:
    """One ILP per outer layout; each constraint family is one method, every constraint named."""

    def __init__(self, graph: nx.DiGraph, layout: Layout, memory_bytes: float, *, objective: str = "time"):
        self.g = graph
        self.layout = layout
        self.order = sorted(graph.nodes, key=lambda n: graph.nodes[n]["index"])
        self.cost: dict[str, LayerCost] = {n: graph.nodes[n]["cost"] for n in self.order}
        self.p, self.v, self.m = layout.pp, layout.vp, layout.num_microbatches
        self.S = self.p * self.v
        self.M = memory_bytes
        self.objective = objective
        self.prob = pulp.LpProblem("placement", pulp.LpMinimize)
        self._idx = {n: i for i, n in enumerate(self.order)}
        var = self.prob.add_variable
        self.x = {(n, j): var(f"x_{self._idx[n]}_{j}", 0, 1, cat=pulp.LpInteger)
                  for n in self.order for j in range(self.S)}
        self.T = var("T_bottleneck_s", 0)
        self.D = var("D_dp_sync_s", 0)
        self.O = var("O_optimizer_s", 0)
        self.Z = var("Z_peak_memory_bytes", 0)
        self.tau = {}
        self.extra = transient_bytes(self.cost, layout)
        self._fix_impossible()
        self.add_assign()
        self.add_nonempty()
        self.add_order()
        self.add_bottleneck()
        self.add_dp_sync()
        self.add_optimizer()
        self.add_memory()
        self.set_objective()

    # -- expressions ---------------------------------------------------------------------
    def A(self, n: str, b: int):
        return pulp.lpSum(self.x[n, k] for k in range(b + 1))

    def crossing(self, e: tuple[str, str], b: int):
        u, v = e
        return self.A(u, b) - self.A(v, b)

    def chunks_of(self, r: int) -> list[int]:
        return [j for j in range(self.S) if j % self.p == r]

    def _fix_impossible(self) -> None:
        """On a chain, chunk j needs j layers before it and S-1-j after it, so layer i can only
        sit on chunks max(0, i-(L-S)) .. min(S-1, i): fix the other x to 0 (a smaller model)."""
        from autoplan.plan.graph import is_chain
        if not is_chain(self.g):
            return
        L = len(self.order)
        for i, n in enumerate(self.order):
            for j in range(self.S):
                if j > i or j < i - (L - self.S):
                    self.x[n, j].upBound = 0

    # -- constraint families -------------------------------------------------------------
    def add_assign(self) -> None:
        for n in self.order:
            self.prob += pulp.lpSum(self.x[n, j] for j in range(self.S)) == 1, f"assign_{self._idx[n]}"

    def add_nonempty(self) -> None:
        for j in range(self.S):
            self.prob += pulp.lpSum(self.x[n, j] for n in self.order) >= 1, f"nonempty_{j}"

    def add_order(self) -> None:
        for k, (u, v) in enumerate(self.g.edges):
            for b in range(self.S - 1):
                self.prob += self.A(v, b) <= self.A(u, b), f"order_e{k}_b{b}"

    def _tau(self, r: int):
        terms = []
        for j in self.chunks_of(r):
            terms += [self.cost[n].per_microbatch_s * self.x[n, j] for n in self.order]
            if j < self.S - 1:
                terms += [self.cost[u].p2p_s * self.crossing((u, v), j) for u, v in self.g.edges]
        return pulp.lpSum(terms)

    def add_bottleneck(self) -> None:
        for r in range(self.p):
            self.tau[r] = self._tau(r)
            self.prob += self.T >= self.tau[r], f"bottleneck_r{r}"

    def add_dp_sync(self) -> None:
        for r in range(self.p):
            self.prob += self.D >= pulp.lpSum(self.cost[n].dp_sync_s * self.x[n, j]
                                              for j in self.chunks_of(r) for n in self.order), f"dp_sync_r{r}"

    def add_optimizer(self) -> None:
        for r in range(self.p):
            self.prob += self.O >= pulp.lpSum(self.cost[n].optimizer_s * self.x[n, j]
                                              for j in self.chunks_of(r) for n in self.order), f"optimizer_r{r}"

    def memory_expr(self, r: int):
        k = inflight_microbatches(self.layout, r)
        terms = [(self.cost[n].static_bytes + k * self.cost[n].act_bytes) * self.x[n, j]
                 for j in self.chunks_of(r) for n in self.order]
        for b in range(self.S - 1):
            if b % self.p == r:
                terms += [self.cost[u].out_bytes * self.crossing((u, v), b) for u, v in self.g.edges]
            if (b + 1) % self.p == r:
                terms += [self.cost[u].out_bytes * self.crossing((u, v), b) for u, v in self.g.edges]
        return pulp.lpSum(terms) + self.extra

    def add_memory(self) -> None:
        for r in range(self.p):
            if self.objective == "memory":
                self.prob += self.Z >= self.memory_expr(r), f"memory_r{r}"
            else:
                self.prob += self.memory_expr(r) <= self.M, f"memory_r{r}"

    def set_objective(self) -> None:
        if self.objective == "memory":
            self.prob += self.Z
        else:
            self.prob += ((self.m - 1.0 / self.v) * self.T + (1.0 / self.v) * pulp.lpSum(self.tau.values())
                          + self.D + self.O)

    # -- solving -------------------------------------------------------------------------
    def solve(self, time_limit_s: float = 10.0, gap_rel: float = 1e-6) -> PlacementResult:
        t0 = time.perf_counter()
        self.prob.solve(_cbc(time_limit_s, gap_rel))
        wall = time.perf_counter() - t0
        status = pulp.LpStatus[self.prob.status]
        if self.prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            return PlacementResult("infeasible", [], float("inf"), float("inf"), wall)
        stages = [[n for n in self.order if (self.x[n, j].value() or 0) > 0.5] for j in range(self.S)]
        obj = float(pulp.value(self.prob.objective))
        optimal = self.prob.sol_status == pulp.LpSolutionOptimal and status == "Optimal"
        bound = obj if optimal else self._lp_bound()
        return PlacementResult("optimal" if optimal else "feasible", stages, obj, bound, wall)

    def _lp_bound(self) -> float:
        """The LP relaxation's optimum: a valid lower bound when CBC stopped at its time limit."""
        relaxed = self.prob.deepcopy()
        for var in relaxed.variables():
            var.cat = pulp.LpContinuous
        relaxed.solve(_cbc(None, None))
        return float(pulp.value(relaxed.objective))

    def write_lp(self, path: str) -> None:
        """Dump the model in LP format (every constraint named) for inspection."""
        self.prob.writeLP(path)


def solve_placement(graph: nx.DiGraph, layout: Layout, memory_bytes: float, *, objective: str = "time",
                    time_limit_s: float = 10.0) -> PlacementResult:
    """Best placement of ``graph``'s layers on ``layout.pp * layout.vp`` chunks."""
    if layout.pp * layout.vp == 1:
        raise ValueError("solve_placement needs at least two chunks")
    return PlacementILP(graph, layout, memory_bytes, objective=objective).solve(time_limit_s)
