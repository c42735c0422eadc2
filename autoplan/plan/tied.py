r"""The tied chain ``first, N identical blocks, last`` seen per pipeline rank, and its relaxation.

Under the cost model a rank's time and memory depend only on how many blocks of each recompute
mode it holds, n[r,c], and on three global 0/1 choices: chunk 0 holds only the
first layer (z0), chunk S-1 only the last (z1), some block is fully recomputed (u: every rank then
holds the full-recompute workspace). With t_c, w_rc = static_c + k_r * act_c, dp_c, opt_c the
per-block coefficients of mode c on rank r (k_r: in-flight micro-batches; static_c without the
gradients backward makes where they do not exist yet at that moment), and the rank's fixed
parts F_r (first/last layers, boundary sends, buffers and held outputs, workspace)::

    tau_r  = sum_c t_c n[r,c] + Ft_r(z0)          mem_r = sum_c w_rc n[r,c] + Fm_r(z0, u) <= M
    dp_r   = sum_c dp_c n[r,c] + Fd_r             opt_r = sum_c opt_c n[r,c] + Fo_r
    objective = (m - 1/vp) max_r tau_r + (1/vp) sum_r tau_r + max_r dp_r + max_r opt_r

(exact for vp = 1; for vp > 1 the ILP's pipeline term m*T + (pp-1)*C, C the slowest chunk, is at
least this, since C >= tau_r / vp on every rank, so the bounds below hold for it too).

``TiedChain`` holds these coefficients; ``TiedChainILP`` (ilp.py) builds its rows from them.

**Relaxation** (a lower bound that respects whole blocks). Fix u and a rank r; for the rank's own
choice of z0, z1 (ranks need not agree on them: a relaxation) the best it can do with n blocks is
a tiny knapsack over the modes::

    g_r(n) = min_z min { sum_c t_c n_c + Ft_r(z0) : n_c >= 0 integer, sum_c n_c = n,
                                                   sum_c w_rc n_c <= M - Fm_r(z0, u) }

(+inf where nothing fits or n breaks the nonempty/alone rules of that z). Removing a block never
costs time or memory, so for each z the finite part is an interval on which g is nondecreasing.
Every feasible placement has tau_r >= g_r(n_r) with sum_r n_r = N, hence, each minimised on its
own::

    T*  = min { L : exists n, sum_r n_r = N, g_r(n_r) <= L for all r }    (T >= T*)
    S*  = min { sum_r g_r(n_r) : sum_r n_r = N }                           (sum_r tau_r >= S*)
    D*, O* = the same min-max as T* with d_r(n) = min_c dp_c n + Fd_r, o_r(n) likewise
    objective >= LB(u) = (m - 1/vp) T* + S*/vp + D* + O*,      LB = min_u LB(u)

T* is a binary search over the values of g (exact but for the coupling of ranks through the
max), S* a min-plus convolution over ranks. Given an incumbent U, a rank's count is also capped:
T <= T_ub(u) = (U - S*/vp - D* - O*) / (m - 1/vp), so n_r <= max { n : g_r(n) <= T_ub(u) } (max
over u). The search prunes an outer layout whose LB exceeds the best step time found, and the ILP
gets T >= T*, sum tau >= S*, D >= D*, O >= O* and the caps as valid cuts (they remove no solution
better than U).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from autoplan.plan.coefficients import LayerCost

INF = math.inf
MODE_ORDER = ("full", "selective", "none")
TIME_ATTRS = ("compute_s", "recompute_s", "tp_comm_s", "cp_comm_s")
"""LayerCost fields that make a layer's time per micro-batch (``LayerCost.per_microbatch_s``)"""
# slack on memory budgets (bytes): the bound must never exclude a mix the ILP (with its
# feasibility tolerance on GiB-scaled rows) accepts
_MEM_SLACK_BYTES = 2.0 ** 13


@dataclass
class TiedChain:
    """Per-rank coefficients of a tied chain on ``p`` ranks x ``v`` chunks (module docstring)."""

    p: int
    v: int
    m: int
    N: int
    """identical blocks between the first and the last layer"""
    modes: tuple[str, ...]
    """recompute modes a block may take (one unless the ILP chooses per block)"""
    block: dict[str, LayerCost]
    first: LayerCost
    last: LayerCost
    inflight: tuple[float, ...]
    """k_r: micro-batches whose activations rank r holds at its peak"""
    held_inflight: tuple[float, ...]
    """h_r: micro-batches every chunk of rank r holds at once (:func:`autoplan.plan.schedules.inflight_floor`;
    k_r without interleaving), the multiplier of the outputs its chunks keep: a lower bound of
    their peak, so the relaxation stays one"""
    grads_inflight: tuple[int, ...]
    """g_r: 1 where rank r's gradients all exist at its k_r moment
    (:func:`autoplan.plan.schedules.grads_at_inflight_peak`); 0 takes the gradients made by
    backward (``LayerCost.late_grad_bytes``) out of its memory, so the relaxation stays one"""
    memory_bytes: float
    workspace_bytes: float
    """placement-independent workspace, without the optional full-recompute one"""
    full_workspace_bytes: float = 0.0
    """added on every rank when some block is fully recomputed (u = 1); 0 when not a choice"""
    last_workspace_bytes: float = 0.0
    """what the last rank adds: the gradient of the chain's output (the logits) where it is larger
    than every other layer's output"""
    _tables: dict = field(default_factory=dict, repr=False)

    @property
    def S(self) -> int:
        return self.p * self.v

    @property
    def full_is_choice(self) -> bool:
        return "full" in self.modes and len(self.modes) > 1

    # -- coefficients ----------------------------------------------------------------------
    def block_time_s(self, c: str) -> float:
        return sum(getattr(self.block[c], a) for a in TIME_ATTRS)

    def block_memory_bytes(self, r: int, c: str) -> float:
        b = self.block[c]
        return b.static_bytes - (1 - self.grads_inflight[r]) * b.late_grad_bytes + self.inflight[r] * b.act_bytes

    def fixed(self, r: int, attr: str) -> float:
        """The first/last layers' part of ``attr`` on rank r."""
        return (getattr(self.first, attr) if r == 0 else 0.0) + (getattr(self.last, attr) if r == self.p - 1 else 0.0)

    def boundaries(self, r: int, recv: bool) -> list[int]:
        """Boundaries b (chunk b | b+1) that rank r sends across (b mod p = r) or receives across."""
        return [b for b in range(self.S - 1) if ((b + 1) if recv else b) % self.p == r]

    def boundary_parts(self, r: int, attr: str, recv: bool) -> tuple[float, float]:
        """(constant, coefficient of z0) of ``attr`` summed over rank r's send or receive boundaries:
        each carries a block's output, boundary 0 the first layer's instead when z0."""
        bs = self.boundaries(r, recv)
        blk = getattr(self.block[self.modes[0]], attr)     # buffer_bytes / p2p_s do not depend on the mode
        return len(bs) * blk, (getattr(self.first, attr) - blk if 0 in bs else 0.0)

    def fixed_time_s(self, r: int, z0: int) -> float:
        """Ft_r: first/last layers' time and the rank's sends."""
        const, coef = self.boundary_parts(r, "p2p_s", recv=False)
        return sum(self.fixed(r, a) for a in TIME_ATTRS) + const + coef * z0

    def fixed_memory_bytes(self, r: int, z0: int, u: int) -> float:
        """Fm_r: first/last layers' state and activations, boundary buffers, the outputs the rank's
        chunks keep per in-flight micro-batch (what they send; the last chunk its logits), workspace."""
        s_const, s_coef = self.boundary_parts(r, "buffer_bytes", recv=False)
        r_const, r_coef = self.boundary_parts(r, "buffer_bytes", recv=True)
        h_const, h_coef = self.boundary_parts(r, "held_out_bytes", recv=False)
        held = h_const + h_coef * z0 + (self.last.held_out_bytes if r == self.p - 1 and self.S > 1 else 0.0)
        return (self.fixed(r, "static_bytes") - (1 - self.grads_inflight[r]) * self.fixed(r, "late_grad_bytes")
                + self.inflight[r] * self.fixed(r, "act_bytes") + self.held_inflight[r] * held
                + s_const + r_const + (s_coef + r_coef) * z0 + self.workspace_bytes + self.full_workspace_bytes * u
                + (self.last_workspace_bytes if r == self.p - 1 else 0.0))

    def count_range(self, r: int, z0: int, z1: int) -> tuple[int, int]:
        """Smallest and largest block count rank r may hold (nonempty chunks; alone_0/1)."""
        if self.S == 1:
            return self.N, self.N
        lo = max(0, self.v - (z0 if r == 0 else 0) - (z1 if r == self.p - 1 else 0))
        hi = self.N
        if self.v == 1 and ((r == 0 and z0) or (r == self.p - 1 and z1)):
            hi = 0
        return lo, hi

    def symmetric_runs(self) -> list[list[int]]:
        """Runs of consecutive ranks that are interchangeable (same in-flight count, no first or
        last layer, same boundaries): permuting their block counts changes nothing."""
        def key(r: int):
            if r in (0, self.p - 1) or r == 1 % self.p:
                return None
            return (self.inflight[r], self.held_inflight[r], len(self.boundaries(r, False)), len(self.boundaries(r, True)))
        runs: list[list[int]] = []
        for r in range(self.p):
            k = key(r)
            if k is not None and runs and key(runs[-1][-1]) == k and runs[-1][-1] == r - 1:
                runs[-1].append(r)
            else:
                runs.append([r])
        return [run for run in runs if len(run) > 1]

    # -- relaxation ------------------------------------------------------------------------
    def configs(self) -> list[int]:
        """The values of u the relaxation distinguishes (z0, z1 are relaxed per rank)."""
        return [0, 1] if self.full_is_choice else [0]

    def z_choices(self, r: int) -> list[tuple[int, int]]:
        """The (z0, z1) values that change rank r's table (others: (0, 0))."""
        if self.S == 1:
            return [(0, 0)]
        z0s = (0, 1) if r in (0, 1 % self.p) else (0,)
        z1s = (0, 1) if r == self.p - 1 else (0,)
        return list(itertools.product(z0s, z1s))

    def rank_table(self, r: int, u: int, kind: str) -> np.ndarray:
        """g_r(n) (kind "time"), d_r(n) ("dp_sync_s") or o_r(n) ("optimizer_s") for a given u,
        minimised over the rank's own z choices (a relaxation: the ranks need not agree on z0)."""
        out = None
        for z0, z1 in self.z_choices(r):
            g = self.time_table(r, z0, z1, u)
            if kind != "time":
                g = np.where(np.isfinite(g), self.linear_table(r, z0, z1, kind), INF)
            out = g if out is None else np.minimum(out, g)
        return out

    def time_table(self, r: int, z0: int, z1: int, u: int) -> np.ndarray:
        """g_r(n) for n = 0..N (inf outside the feasible counts)."""
        lo, hi = self.count_range(r, z0, z1)
        modes = [c for c in self.modes if u or not self.full_is_choice or c != "full"]
        t = tuple(self.block_time_s(c) for c in modes)
        w = tuple(self.block_memory_bytes(r, c) for c in modes)
        budget = self.memory_bytes - self.fixed_memory_bytes(r, z0, u) + _MEM_SLACK_BYTES
        key = (t, w, budget, lo, hi, self.fixed_time_s(r, z0))
        if key not in self._tables:
            g = best_mix_times(np.array(t), np.array(w), budget, self.N) + self.fixed_time_s(r, z0)
            g[:lo] = INF
            g[hi + 1:] = INF
            self._tables[key] = g
        return self._tables[key]

    def linear_table(self, r: int, z0: int, z1: int, attr: str) -> np.ndarray:
        """d_r(n) (attr dp_sync_s) or o_r(n) (optimizer_s) on rank r's count range."""
        lo, hi = self.count_range(r, z0, z1)
        per = min(getattr(self.block[c], attr) for c in self.modes)
        out = per * np.arange(self.N + 1, dtype=float) + self.fixed(r, attr)
        out[:lo] = INF
        out[hi + 1:] = INF
        return out

    @cached_property
    def relaxation(self) -> list["ConfigBound"]:
        """The bound for each u that has a solution of the relaxation."""
        out = []
        for u in self.configs():
            g = [self.rank_table(r, u, "time") for r in range(self.p)]
            T = min_max_level(g, self.N)
            if math.isinf(T):
                continue
            D = min_max_level([self.rank_table(r, u, "dp_sync_s") for r in range(self.p)], self.N)
            O = min_max_level([self.rank_table(r, u, "optimizer_s") for r in range(self.p)], self.N)
            out.append(ConfigBound(u, g, T, min_sum(g, self.N), D, O))
        return out

    def objective_of(self, cb: "ConfigBound", relief: float = 1.0) -> float:
        return relief * ((self.m - 1.0 / self.v) * cb.T + cb.sum_tau / self.v) + cb.D + cb.O

    def lower_bound(self, relief: float = 1.0) -> float:
        """A step time (without the calibrated overhead) no placement can beat; inf if none fits.
        ``relief``: the least factor the cost model may apply to the pipeline term
        (:func:`autoplan.plan.schedules.shared_device_relief`; 1 on devices that do not share cores)."""
        return min((self.objective_of(cb, relief) for cb in self.relaxation), default=INF)

    def count_caps(self, incumbent: float) -> list[int] | None:
        """Largest block count of each rank in any solution with objective <= ``incumbent``
        (None: no such solution)."""
        caps = [-1] * self.p
        slope = self.m - 1.0 / self.v
        for cb in self.relaxation:
            rest = incumbent - cb.sum_tau / self.v - cb.D - cb.O
            if slope > 0:
                t_ub = rest / slope
                if t_ub < cb.T * (1 - 1e-12):
                    continue
                t_ub = t_ub * (1 + 1e-9) + 1e-15
            else:
                if rest < -1e-12 * abs(incumbent):
                    continue
                t_ub = INF
            for r, g in enumerate(cb.tables):
                ok = np.flatnonzero(g <= t_ub)
                if ok.size:
                    caps[r] = max(caps[r], int(ok[-1]))
        return None if any(c < 0 for c in caps) else caps


@dataclass
class ConfigBound:
    """The relaxation's parts for one value of u."""

    u: int
    tables: list[np.ndarray]
    T: float
    sum_tau: float
    D: float
    O: float


def best_mix_times(t: np.ndarray, w: np.ndarray, budget: float, N: int) -> np.ndarray:
    """For n = 0..N, the least ``sum_c t_c n_c`` over integer n_c >= 0 with ``sum_c n_c = n`` and
    ``sum_c w_c n_c <= budget`` (inf if none): exact for up to three modes (the count of the first
    is enumerated, the other two are split in closed form)."""
    n = np.arange(N + 1, dtype=float)
    if len(t) == 1:
        return np.where(w[0] * n <= budget, t[0] * n, INF)
    if len(t) == 2:
        return _two_modes(t[0], t[1], w[0], w[1], np.full(N + 1, float(budget)), n)
    if len(t) != 3:
        raise ValueError("best_mix_times handles one to three modes")
    f = n[:, None]                                     # count of mode 0 (rows)
    rest = n[None, :] - f                              # blocks left for modes 1 and 2
    budget_left = np.broadcast_to(budget - w[0] * f, rest.shape)
    cost = t[0] * f + _two_modes(t[1], t[2], w[1], w[2], budget_left, np.maximum(rest, 0))
    return np.where(rest >= 0, cost, INF).min(axis=0)


def _two_modes(ta: float, tb: float, wa: float, wb: float, budget: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Least time splitting R blocks between modes a and b within ``budget`` (elementwise)."""
    if ta > tb:
        ta, tb, wa, wb = tb, ta, wb, wa                   # a is the faster mode
    if wa <= wb:                                          # a dominates: all a
        return np.where(wa * R <= budget, ta * R, INF)
    # as many of the faster (bigger) mode as the budget allows
    room = (budget - wb * R) / (wa - wb)
    na = np.minimum(R, np.floor(room + 1e-9))
    return np.where(room >= -1e-9, ta * na + tb * (R - na), INF)


def min_max_level(tables: list[np.ndarray], N: int) -> float:
    """The least L such that some counts n_r (sum N) have f_r(n_r) <= L on every rank, where each
    f_r is finite on an interval (inf if no counts exist). Each f_r is replaced by its lower
    envelope min_{n' >= n} f_r(n'), which keeps the answer a valid lower bound for any f_r."""
    los, envs = [], []
    for f in tables:
        idx = np.flatnonzero(np.isfinite(f))
        if not idx.size:
            return INF
        lo, hi = int(idx[0]), int(idx[-1])
        env = np.minimum.accumulate(f[lo:hi + 1][::-1])[::-1]
        los.append(lo)
        envs.append(env)
    if sum(los) > N or sum(lo + len(e) - 1 for lo, e in zip(los, envs)) < N:
        return INF
    start = max(float(e[0]) for e in envs)
    cands = np.unique(np.concatenate(envs))
    cands = cands[cands >= start]

    def reach(level: float) -> int:     # most blocks the ranks hold with every f_r <= level
        return sum(lo + int(np.searchsorted(e, level, side="right")) - 1 for lo, e in zip(los, envs))

    lo_i, hi_i = 0, len(cands) - 1
    while lo_i < hi_i:
        mid = (lo_i + hi_i) // 2
        if reach(cands[mid]) >= N:
            hi_i = mid
        else:
            lo_i = mid + 1
    return float(cands[lo_i])


def min_sum(tables: list[np.ndarray], N: int) -> float:
    """min sum_r f_r(n_r) over counts with sum_r n_r = N (min-plus convolution over ranks)."""
    k = np.arange(N + 1)
    shift = k[:, None] - k[None, :]                      # shift[k, n] = k - n
    valid = shift >= 0
    shift = np.where(valid, shift, 0)
    best = tables[0].copy()
    for f in tables[1:]:
        best = np.where(valid, best[shift] + f[None, :], INF).min(axis=1)
    return float(best[N])
