"""Your weights in, your tokens, your weights out: Hugging Face checkpoints trained under every layout family.

Tiny fp32 GPT-2 and Llama (grouped-query attention, sharded safetensors) checkpoints are saved with
``save_pretrained`` inside the test, and a prose corpus is tokenized with a BPE tokenizer trained in the test
(:mod:`tests.hf_checkpoints`). Then, in one job of 4 gloo processes and one of 8 (TP x PP x DP; process
start-up and gloo's groups dominate on CPU, so every layout of a job runs in the same processes, and the
8-process job in the session's shared one, tests/conftest.py):

- for both models and the layouts DDP, ZeRO-3, TP+SP, PP 1F1B, interleaved, CP and TP x PP x DP, the model is
  built on the meta device and each rank reads its shards from the files; the first step's loss equals
  ``transformers``' own loss of the checkpoint on the same batch (1e-5), 20 SGD steps run on the corpus,
  the DCP checkpoint is exported to an HF directory that ``from_pretrained`` loads, and its weights equal
  ``transformers``' model trained in one process on the same batches (and so does the forward-only
  ``eval_loss`` on the next batch);
- the resident memory a rank gains while loading a 35 MiB Llama under ZeRO-3 (dp=4) and PP (pp=4) is at
  most its own parameters plus one layer (plus 2 MiB for the interpreter's own allocations).

Then ``examples/finetune_hf.py`` under torchrun is killed at step 4 and resumed (the losses equal the
one-process run: the token stream continued), and ``autoplan export-weights`` writes its checkpoint. Bad
input ends with one ``error:`` line and exit code 2.

    python -m pytest tests/test_hf_weights.py -q
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from cli_utils import run_cli  # noqa: E402
from dist_utils import even_stages, run_on_ranks  # noqa: E402
from hf_checkpoints import SEQ_LEN, VOCAB, make_assets, make_gpt2, make_llama, make_tokenizer  # noqa: E402

from autoplan.errors import InputError, LayoutError  # noqa: E402
from autoplan.plan.plan import Layout, Plan, Prediction, SolverInfo, TrainingSpec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FINETUNE = REPO / "examples" / "finetune_hf.py"
GLOBAL_BATCH, STEPS, LR, SEED = 8, 20, 0.1, 0
FAMILIES = ("gpt2", "llama")


def _layout(**kw) -> dict:
    base = dict(dp=1, tp=1, pp=1, vp=1, mbs=1, num_microbatches=1, zero=0, schedule="1f1b", sp=0)
    return {**base, **kw}


LAYOUTS = {   # 4 processes, global batch 8
    "ddp": _layout(dp=4, mbs=2),
    "zero3": _layout(dp=4, mbs=2, zero=3),
    "tp2-sp x dp2": _layout(tp=2, dp=2, mbs=4, sp=1, zero=1),
    "pp4-1f1b": _layout(pp=4, mbs=2, num_microbatches=4, stages=even_stages(4, 4)),
    "pp2-interleaved x dp2": _layout(pp=2, vp=2, dp=2, mbs=2, num_microbatches=2, schedule="interleaved",
                                     stages=even_stages(4, 4)),
    "cp2 x dp2": _layout(cp=2, dp=2, mbs=4),
}
LAYOUTS_8 = {"tp2 x pp2 x dp2": _layout(tp=2, pp=2, dp=2, mbs=2, num_microbatches=2, sp=1, zero=1,
                                        stages=even_stages(4, 2))}
MEMORY_LAYOUTS = {"zero3": _layout(dp=4, zero=3), "pp4": _layout(pp=4, num_microbatches=4, stages=even_stages(8, 4))}
TIED_LAYOUT = _layout(dp=4, mbs=2, zero=3)
SLACK_BYTES = 2 << 20
"""resident memory allowed beyond a rank's parameters and one layer while loading (Python objects, the
process groups' small buffers)"""


def write_plan(path: Path, spec: str, layout: dict) -> Path:
    """A hand plan for a 4-block ``spec`` (a plan lists its stages)."""
    lay = Layout.from_dict({"stages": even_stages(4, layout["pp"] * layout["vp"]), **layout})
    Plan(layout=lay, predicted=Prediction(step_time_s=0.0, peak_memory_bytes=0, breakdown_s={}),
         solver=SolverInfo(status="hand", objective=0.0, bound=0.0, wall_s=0.0),
         training=TrainingSpec(model_spec=spec, shape=None, global_batch=lay.global_batch, seq_len=SEQ_LEN,
                               optimizer="sgd", world_size=lay.world_size)).save(path)
    return path


def prepare_assets(root: Path) -> tuple:
    """Both checkpoints, the tokenizer, the tokenized corpus, a bigger Llama (``big``, for the loading memory)
    and a tied GPT-2 under ``root``; returns the 8-process job's arguments (``root`` first)."""
    from autoplan.execute.token_data import tokenize_text

    make_assets(root)
    tokenize_text(root / "corpus.txt", root / "tokenizer", root / "corpus.bin", model_vocab=VOCAB)
    make_llama(root / "big", layers=8, hidden=256, ffn=1024, vocab=2048, max_shard_size="8MB")
    make_gpt2(root / "tied", tied=True)
    return str(root), LAYOUTS_8, f"hf:{root / 'big'}", {}


@pytest.fixture(scope="module")
def assets(shared_jobs) -> Path:
    return Path(shared_jobs.args(__name__, "eight")[0])


def batches(root: Path, steps: int, *, dp_rank: int = 0, dp_size: int = 1, inputs: bool = True,
            labels: bool = True, val_fraction: float = 0.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first ``steps`` training batches of the corpus (this DP rank's rows)."""
    from autoplan.execute.token_data import TokenBatches, TokenCorpus

    data = TokenBatches(TokenCorpus.open(root / "corpus.bin", vocab=VOCAB), seq_len=SEQ_LEN,
                        global_batch=GLOBAL_BATCH, val_fraction=val_fraction, seed=SEED)
    return [data.next_train_batch(dp_rank=dp_rank, dp_size=dp_size, inputs=inputs, labels=labels)
            for _ in range(steps)]


def hf_reference(root: Path, family: str, steps: int, val_fraction: float = 0.0
                 ) -> tuple[list[float], dict[str, torch.Tensor], float]:
    """``transformers``' model of the checkpoint in one process, SGD on the full batches of the training
    split: (its own loss of each step, the state dict after ``steps`` steps, then its loss on the next
    batch without a step)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(root / family), attn_implementation="sdpa").float()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    *train, (x, y) = batches(root, steps + 1, val_fraction=val_fraction)
    for tokens, labels in train:
        loss = model(input_ids=tokens, labels=labels, shift_labels=labels).loss   # labels: already shifted
        loss.backward()
        losses.append(loss.item())
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        after = model(input_ids=x, labels=y, shift_labels=y).loss.item()
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}, after


def assert_same_weights(out_dir: Path, want: dict[str, torch.Tensor], what: str) -> None:
    from transformers import AutoModelForCausalLM

    got = AutoModelForCausalLM.from_pretrained(str(out_dir)).state_dict()
    assert set(got) == set(want), f"{what}: {sorted(set(got) ^ set(want))}"
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=2e-6, msg=lambda m, k=k: f"{what} {k}: {m}")


# --- the 8-process job --------------------------------------------------------------------------------

def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _local_bytes(par) -> int:
    from torch.distributed.tensor import DTensor

    return sum((p.to_local() if isinstance(p, DTensor) else p).numel() * p.element_size() for p in par.parameters())


def layouts_worker(rank: int, world: int, root: str, layouts: dict[str, dict], big: str,
                   memory_layouts: dict[str, dict], tied: str | None = None) -> dict:
    """Train every (family, layout) 20 steps from the checkpoint and save it; then measure loading memory;
    then the first loss of the ``tied`` checkpoint under :data:`TIED_LAYOUT`."""
    import ctypes
    import gc

    from autoplan.execute.apply import parallelize
    from autoplan.execute.checkpoint import save
    from autoplan.models.registry import build_model_from_spec

    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 128 << 10)   # M_MMAP_THRESHOLD fixed: freed tensors go back to the OS, RSS follows them
    out: dict = {"losses": {}, "memory": {}, "seconds": {}}
    for family in FAMILIES:
        for name, d in layouts.items():
            t0 = time.perf_counter()
            layout = Layout.from_dict(d)
            par = parallelize(build_model_from_spec(f"hf:{root}/{family}", load_weights=True), layout)
            opt = torch.optim.SGD(par.parameters(), lr=LR)
            losses = []
            *train, (x, y) = batches(Path(root), STEPS + 1, dp_rank=par.dp_rank, dp_size=par.dp_size,
                                     inputs=par.is_first_stage, labels=par.is_last_stage)
            for tokens, labels in train:
                losses.append(par.step(tokens, labels))
                opt.step()
                opt.zero_grad()
            save(par, opt, STEPS, Path(root) / "ckpt" / f"{family}-{name}")
            out["losses"][(family, name)] = losses + [par.eval_loss(x, y)]    # and forward only on the next batch
            out["seconds"][(family, name)] = time.perf_counter() - t0
    for name, d in memory_layouts.items():
        gc.collect()
        libc.malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")        # resets the peak (VmHWM) to the current RSS
        base = _status_bytes("VmRSS")
        par = parallelize(build_model_from_spec(big, load_weights=True), Layout.from_dict(d))
        out["memory"][name] = (_status_bytes("VmHWM") - base, _local_bytes(par))
        del par
    if tied is not None:
        par = parallelize(build_model_from_spec(tied, load_weights=True), Layout.from_dict(TIED_LAYOUT))
        tokens, labels = batches(Path(root), 1, dp_rank=par.dp_rank, dp_size=par.dp_size)[0]
        out["tied_loss"] = par.step(tokens, labels)
    return out


SHARED_JOBS = {"eight": (8, layouts_worker, prepare_assets, 300)}   # the session's 8-process job (tests/conftest.py)
"""(the 4-process job runs alone: its loading-memory figures need processes that have run nothing else)"""


@pytest.fixture(scope="module")
def trained(assets, shared_jobs) -> tuple[Path, list[dict], dict]:
    eight = shared_jobs.get(__name__, "eight")
    four = run_on_ranks(layouts_worker, 4, args=(str(assets), LAYOUTS, f"hf:{assets / 'big'}", MEMORY_LAYOUTS,
                                                 f"hf:{assets / 'tied'}"), timeout_s=300)
    for r in four[:1] + eight[:1]:
        print("seconds per layout (rank 0):", {k: round(v, 1) for k, v in r["seconds"].items()})
    for rank, r in enumerate(four):
        print(f"rank {rank} loading, MiB gained / own parameters:",
              {k: (round(p / 2**20, 2), round(n / 2**20, 2)) for k, (p, n) in r["memory"].items()})
    return assets, (four, eight), {f: hf_reference(assets, f, STEPS) for f in FAMILIES}


@pytest.mark.slow
@pytest.mark.timeout(500)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_layout_loads_trains_and_exports_the_checkpoint(trained, family, tmp_path):
    from autoplan.execute.hf_export import export_checkpoint

    root, (four, eight), refs = trained
    ref_losses, ref_weights, ref_eval = refs[family]
    for name, per_rank in [(n, four) for n in LAYOUTS] + [(n, eight) for n in LAYOUTS_8]:
        *losses, evaluated = per_rank[0]["losses"][(family, name)]
        assert all(r["losses"][(family, name)] == losses + [evaluated] for r in per_rank), f"{name}: ranks disagree"
        assert abs(losses[0] - ref_losses[0]) <= 1e-5 * ref_losses[0], \
            f"{family} {name}: first loss {losses[0]} != transformers' {ref_losses[0]}"
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-4, err_msg=f"{family} {name}")
        assert abs(evaluated - ref_eval) <= 1e-4 * ref_eval, f"{family} {name}: eval {evaluated} != {ref_eval}"
        out = tmp_path / name
        export_checkpoint(root / "ckpt" / f"{family}-{name}", f"hf:{root}/{family}", out)
        assert_same_weights(out, ref_weights, f"{family} {name}")
    assert ref_losses[-1] < ref_losses[0] - 0.1, "the reference did not learn: the comparison is vacuous"


@pytest.mark.slow
@pytest.mark.timeout(500)
@pytest.mark.parametrize("name", list(MEMORY_LAYOUTS))
def test_loading_holds_the_shard_plus_one_layer(trained, name):
    root = trained[0]
    layer_bytes = sum(t.numel() * t.element_size() for k, t in _big_tensors(root / "big").items()
                      if k.startswith("model.layers.0."))
    full_bytes = sum(t.numel() * t.element_size() for t in _big_tensors(root / "big").values())
    for rank, r in enumerate(trained[1][0]):
        peak, local = r["memory"][name]
        assert local < full_bytes / 3, f"{name} rank {rank}: the layout does not shard ({local} bytes)"
        assert peak <= local + layer_bytes + SLACK_BYTES, \
            f"{name} rank {rank}: {peak / 2**20:.2f} MiB while loading, its parameters {local / 2**20:.2f} MiB " \
            f"+ one layer {layer_bytes / 2**20:.2f} MiB (the whole model: {full_bytes / 2**20:.2f} MiB)"


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_tied_checkpoint_loads_with_the_head_from_the_embedding(trained):
    """A GPT-2 saved with tied embeddings holds no ``lm_head.weight``: the head is read from ``wte``."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    root = trained[0]
    with safe_open(str(root / "tied" / "model.safetensors"), framework="pt") as f:
        assert "lm_head.weight" not in f.keys()
    model = AutoModelForCausalLM.from_pretrained(str(root / "tied"))
    tokens, labels = batches(root, 1)[0]
    with torch.no_grad():
        want = model(input_ids=tokens, labels=labels, shift_labels=labels).loss.item()
    for r in trained[1][0]:
        assert abs(r["tied_loss"] - want) <= 1e-5 * want, (r["tied_loss"], want)


def _big_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


# --- finetune_hf.py under torchrun: kill, resume, export ----------------------------------------------

def run_cmd(args: list[str], timeout_s: float = 200) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO,
                          env=env)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_finetune_killed_and_resumed_continues_the_token_stream(assets, tmp_path):
    plan = write_plan(tmp_path / "plan.json", f"hf:{assets}/llama",
                      _layout(pp=2, mbs=2, num_microbatches=4, stages=even_stages(4, 2)))
    ckpt = tmp_path / "ckpt"
    r = run_cmd(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=1",
                 str(FINETUNE), "--plan", str(plan), "--data", str(assets / "corpus.bin"), "--steps", "6",
                 "--optimizer", "sgd", "--lr", str(LR), "--eval-every", "3", "--val-fraction", "0.1",
                 "--ckpt-dir", str(ckpt), "--ckpt-every", "3", "--fail-at-step", "4"])
    assert r.returncode == 0, r.stderr[-3000:]
    got = [(int(m[1]), float(m[2])) for m in re.finditer(r"^step (\d+) loss (\S+) time_s \S+$", r.stdout, re.M)]
    # first attempt: steps 0..3 (rank 1 dies at 4); the restart resumes from the step-3 checkpoint
    assert [s for s, _ in got] == [0, 1, 2, 3, 3, 4, 5], r.stdout
    assert "resumed from step 3" in r.stdout and "24 samples consumed" in r.stdout
    val = [float(v) for v in re.findall(r"^eval step 6 val_loss (\S+)$", r.stdout, re.M)]
    assert len(val) == 1, r.stdout
    # the one-process reference draws from the same split (10% held out) in the same order
    want = hf_reference(assets, "llama", 6, val_fraction=0.1)
    for step, loss in got:
        assert abs(loss - want[0][step]) <= 1e-5 * want[0][step], f"step {step}: {loss} != {want[0][step]}"
    out = tmp_path / "exported"
    e = run_cli("export-weights", str(ckpt), "--plan", str(plan), "--to-hf", str(out))      # in this process
    assert e.returncode == 0, e.stderr
    assert_same_weights(out, want[1], "finetune_hf")
    # the eval line: the exported (= reference) model's mean loss over the first 4 validation batches
    from transformers import AutoModelForCausalLM

    from autoplan.execute.token_data import TokenBatches, TokenCorpus

    model = AutoModelForCausalLM.from_pretrained(str(out))
    held_out = TokenBatches(TokenCorpus.open(assets / "corpus.bin", vocab=VOCAB), seq_len=SEQ_LEN,
                            global_batch=GLOBAL_BATCH, val_fraction=0.1, seed=SEED).val_batches(4)
    with torch.no_grad():
        ref_val = np.mean([model(input_ids=x, labels=y, shift_labels=y).loss.item() for x, y in held_out])
    assert len(held_out) == 4 and abs(val[0] - ref_val) <= 1e-5 * ref_val, (val, ref_val)
    from autoplan.execute.hf_export import export_plan_weights

    with pytest.raises(InputError, match="already exists"):      # never written over
        export_plan_weights(ckpt, plan, out)


# --- bad input ------------------------------------------------------------------------------------------

def _finetune_module():
    spec = importlib.util.spec_from_file_location("finetune_hf", FINETUNE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_bad_input_is_refused_before_training(assets, tmp_path):
    """Each bad input raises the project's error in ``prepare`` (what every rank runs before any collective)."""
    ft = _finetune_module()
    corpus = assets / "corpus.bin"
    ok = write_plan(tmp_path / "ok.json", f"hf:{assets}/llama", _layout(dp=2, mbs=4))   # global batch 8

    def prepare(plan: Path, data: Path = corpus, *extra: str):
        return ft.prepare(ft.parse_args(["--plan", str(plan), "--data", str(data), "--steps", "1", *extra]))

    job = prepare(ok)
    assert job.model.unit_names()[0] == "embed" and next(job.model.parameters()).is_meta
    # a layout the checkpoint's config cannot divide: 2 KV heads over tp=4
    with pytest.raises(LayoutError, match="does not divide the 2 key/value heads"):
        prepare(write_plan(tmp_path / "tp4.json", f"hf:{assets}/llama", _layout(tp=4)))
    # a missing shard
    broken = tmp_path / "broken"
    shutil.copytree(assets / "llama", broken)
    next(broken.glob("model-00003-*.safetensors")).unlink()
    with pytest.raises(InputError, match="missing checkpoint shard"):
        prepare(write_plan(tmp_path / "broken.json", f"hf:{broken}", _layout(dp=2)))
    # a corpus shorter than one global batch (8 samples of 16+1 tokens)
    short = tmp_path / "short.bin"
    np.arange(100, dtype="<u2").tofile(short)
    with pytest.raises(InputError, match="fewer training samples than one global batch"):
        prepare(ok, short)
    # a token id beyond the vocabulary
    wild = tmp_path / "wild.bin"
    np.concatenate([np.fromfile(corpus, dtype="<u2")[:500], [VOCAB + 3]]).astype("<u2").tofile(wild)
    with pytest.raises(InputError, match=f"token 500 is {VOCAB + 3}, outside"):
        prepare(ok, wild)
    # a corpus tokenized with a tokenizer whose vocabulary the model does not have (its sidecar says so)
    from autoplan.execute.token_data import tokenize_text

    make_tokenizer((assets / "corpus.txt").read_text(), tmp_path / "tok300", vocab=300)
    tokenize_text(assets / "corpus.txt", tmp_path / "tok300", tmp_path / "other.bin")
    with pytest.raises(InputError, match="tokenizer does not match the model"):
        prepare(ok, tmp_path / "other.bin")
    with pytest.raises(InputError, match="not hf:"):
        from autoplan.execute.hf_export import export_checkpoint
        export_checkpoint(tmp_path, "gpt-tiny", tmp_path / "x")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_bad_input_ends_with_one_error_line(assets, tmp_path):
    """The same refusals as the user meets them: one ``error:`` line, exit code 2, nothing written."""
    make_tokenizer((assets / "corpus.txt").read_text(), tmp_path / "tok300", vocab=300)
    r = run_cmd(["-m", "autoplan.cli", "tokenize", str(assets / "corpus.txt"), "--tokenizer", str(tmp_path / "tok300"),
                 "--model", f"hf:{assets}/llama", "--out", str(tmp_path / "c.bin")], 100)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: "), r.stderr
    assert "does not match the model" in r.stderr and not list(tmp_path.glob("*.bin*"))
    plan = write_plan(tmp_path / "plan.json", f"hf:{assets}/llama", _layout(mbs=8))
    short = tmp_path / "short.bin"
    np.arange(100, dtype="<u2").tofile(short)
    r = run_cmd([str(FINETUNE), "--plan", str(plan), "--data", str(short), "--steps", "2"], 100)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.strip().count("\n") == 0, r.stderr
