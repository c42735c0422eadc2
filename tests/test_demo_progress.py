"""The demo's long in-group profile says how far it is, at most every PROGRESS_EVERY_S seconds, and at the end."""

from __future__ import annotations


def test_progress_speaks_at_most_every_interval_and_at_the_end(monkeypatch):
    import autoplan.demo as demo
    clock = iter([0.0, 5.0, 19.9, 20.0, 30.0, 31.0])
    monkeypatch.setattr(demo.time, "perf_counter", lambda: next(clock))
    said: list[str] = []
    update = demo.every(20.0, said.append)
    for k, what in enumerate(["whole model mbs=1", "block tp=2", "block tp=4", "block zero3", "pipeline pp=2"], 1):
        update(k, 6, what)
    update(6, 6)
    assert said == ["1/6 whole model mbs=1", "4/6 block zero3", "6/6"]
