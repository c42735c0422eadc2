"""Probes 20261207j part 7 (PREREGISTRATION.md): the branch's and main's models judged on the same fresh workloads.

    PYTHONPATH=/work/wt-stack python docs/probes/20261207j/part7_judge.py /work/exp/s26/d20261261 > docs/probes/20261207j/part7.out

Run with the branch's package on the path (its profiles hold the stack). "main" is the same code with
``stage_composition`` at 1.0, which is all main's cost model differs by."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
import autoplan.plan.coefficients as co   # noqa: E402
import retro   # noqa: E402

real = co.stage_composition


def main() -> None:
    wls = retro.stored_workloads(os.path.join(sys.argv[1], "w*"))
    for name, fn in (("main", lambda *a, **k: 1.0), ("branch", real)):
        co.stage_composition = fn
        res = [retro.judge_workload(wl) for wl in wls]
        for wl, ch, miss, m1, err in res:
            print(f"{name}: {os.path.basename(wl)} error {err:.1%}, choice {ch}: {miss:+.1%} pooled, {m1:+.1%} job 1")
        n, ok, ok1, err, _ = retro.summary(res)
        print(f"{name}: {n} workloads, within 5% pooled {ok}, job 1 {ok1}; mean error {err:.1%}")


if __name__ == "__main__":
    main()
