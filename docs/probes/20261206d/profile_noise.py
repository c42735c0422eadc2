"""How much do a workload's predictions move from one profile to the next, and does a profile with more
repeats move them less?

    python docs/probes/20261206d/profile_noise.py measure WORKLOAD_DIR REPEATS OUT.json   # one fresh in-group profile
    python docs/probes/20261206d/profile_noise.py compare WORKLOAD_DIR A.json B.json ...    # the layouts re-predicted

``measure`` keeps the stored profile's figures of layers alone and measures its in-group figures again
(``profile model --nproc W`` does the same after the layers alone: the whole model, the kinds in groups,
the pipeline runs) with ``repeats`` samples per case (the default is 7). ``compare`` predicts the workload's
measured layouts with each profile and prints, per profile, each layout's log prediction less the
profile's mean, and the sd over profiles of those (per layout, then its median): the part of the model's
per-layout error a profile's own noise makes."""
import math, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))


def measure(wl, repeats, out):
    from autoplan.execute.group_profile import GroupProfileConfig, profile_groups_into
    from autoplan.profile.formats import ModelProfile
    p = ModelProfile.load(f"{wl}/model.json")
    world = max(g.world for g in p.whole_model_timings)
    sizes = tuple(sorted({g.mbs for g in p.whole_model_timings if g.world == world}))
    cfg = GroupProfileConfig(spec=f"{wl}/shape.json", mbs_list=sizes, seq_len=p.seq_len, repeats=repeats)
    p = profile_groups_into(p, cfg, world)
    p.save(out)
    print(f"{out}: {world} processes, sizes {sizes}, repeats {repeats}")


def compare(wl, paths):
    from retro import load_runs, problem
    from autoplan.plan.api import estimate_problem
    from autoplan.plan.plan import Layout
    d, once, _, _ = load_runs(wl)
    rows = {}
    for path in paths:
        pb = problem(wl, d, path)
        x = {k: math.log(estimate_problem(pb, Layout.from_dict(r["layout"]))[1].step_time_s) for k, r in once.items()}
        mu = st.mean(x.values())
        rows[path] = {k: v - mu for k, v in x.items()}
    sds = {k: st.stdev([rows[p][k] for p in paths]) for k in once}
    for k in sorted(once, key=lambda k: rows[paths[0]][k]):
        print(f"  {k:58s} " + " ".join(f"{rows[p][k]:+.3f}" for p in paths) + f"   sd {sds[k]:.3f}")
    print(f"median sd over {len(paths)} profiles: {st.median(sds.values()):.3f}; picks: "
          + ", ".join(min(rows[p], key=rows[p].get) for p in paths))


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        measure(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        compare(sys.argv[2], sys.argv[3:])
