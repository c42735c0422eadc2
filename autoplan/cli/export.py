"""``autoplan export`` and ``export-weights``: a plan as another framework's configuration, a trained
checkpoint as a Hugging Face directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from autoplan.export import Target


def export_cmd(
    plan: Path = typer.Argument(..., help="plan JSON written by solve"),
    to: Target = typer.Option(..., "--to", help="megatron (Megatron-LM command), torchtitan (torchtitan 0.3 command), "
                                             "torchtitan-toml (job file of torchtitan <= 0.2), deepspeed (JSON "
                                             "config) or accelerate (YAML config)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the file here (default: print it)"),
    as_json: bool = typer.Option(False, "--json", help="print {framework, format, config, warnings, text} as JSON"),
) -> None:
    """Write the plan as another framework's configuration.

    What the framework cannot express is refused (exit 2) or approximated with a warning on stderr
    that says what changes."""
    from autoplan.export import export_plan
    from autoplan.plan.plan import Plan
    exp = export_plan(Plan.load(plan), to, str(plan))
    for w in exp.warnings:
        typer.echo(f"warning: {w}", err=True)
    if out:
        exp.save(out)
    if as_json:
        typer.echo(json.dumps(exp.to_dict(), indent=2))
    elif out:
        typer.echo(f"wrote {out} ({exp.framework} {exp.format}); launch: {exp.launch}", err=True)
    else:
        typer.echo(exp.text, nl=False)


def export_weights_cmd(
    ckpt_dir: Path = typer.Argument(..., help="checkpoint directory of a training run (its latest step), or one step "
                                              "directory (DCP, any layout)"),
    plan: Path = typer.Option(..., "--plan", help="the plan the model was trained with (names the hf: model)"),
    to_hf: Path = typer.Option(..., "--to-hf", help="new Hugging Face directory to write (safetensors + config.json)"),
) -> None:
    """Write a trained checkpoint of an hf: model as a Hugging Face directory that
    transformers.AutoModelForCausalLM.from_pretrained loads."""
    from autoplan.execute.hf_export import export_plan_weights
    step_dir, files = export_plan_weights(ckpt_dir, plan, to_hf)
    typer.echo(f"wrote {to_hf} from {step_dir}: {', '.join(files)}", err=True)
