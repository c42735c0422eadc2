"""The relief no deeper than the runs measured: u floored at pp/(2pp-1), the busy share of a run with m = pp."""
import sys
sys.path.insert(0, __import__('os').path.dirname(__file__))
import autoplan.plan.pipeline_costs as pc
from retro import evaluate, stored_workloads
orig = pc.relief_at
def relief_at(slowdown, busy_s, pipeline_s):
    p = len(busy_s)
    if slowdown <= 1.0 or p < 2 or pipeline_s <= 0: return 1.0
    u = max(sum(busy_s) / (p * pipeline_s), p / (2 * p - 1))
    return max(1.0 / slowdown, min(1.0, u))
if sys.argv[1] == 'floor': pc.relief_at = relief_at
wls = stored_workloads()
evaluate(wls, verbose='-v' in sys.argv)
