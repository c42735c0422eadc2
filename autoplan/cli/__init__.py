"""The ``autoplan`` command line: thin typed wrappers over the library, one module per stage.

- :mod:`autoplan.cli.profile`: ``profile``, ``profile model``, ``profile cluster`` (measure);
- :mod:`autoplan.cli.plan`: ``solve``, ``estimate``, ``show`` (choose, cost and draw a layout);
- :mod:`autoplan.cli.execute`: ``run``, ``validate``, ``demo``, ``tokenize`` (train with a plan, measure it);
- :mod:`autoplan.cli.export`: ``export``, ``export-weights`` (other frameworks' files);
- :mod:`autoplan.cli.common`: help texts and the option values parsed here (sizes, lists).

Each command parses its options and calls the library. This package is the only place that turns
errors into exit codes (:func:`main`): an :class:`AutoplanError` (bad input, impossible layout, a model
that fits nowhere) or a usage error becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, List, Optional

import typer

from autoplan.cli import execute, export, plan, profile
from autoplan.cli.common import err
from autoplan.errors import AutoplanError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure, choose and apply the hybrid parallel layout (DP/ZeRO, TP, CP, PP) for training a "
                       "PyTorch model.  profile -> solve -> run; `autoplan demo` does all three on this machine.")


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version
        try:
            typer.echo(f"autoplan {version('autoplan')}")
        except PackageNotFoundError:
            typer.echo("autoplan (not installed: no package metadata)")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    _version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                  help="print autoplan's version and exit"),
) -> None:
    """Measure, choose and apply the hybrid parallel layout (DP/ZeRO, TP, CP, PP) for training a PyTorch model.
    profile -> solve -> run; `autoplan demo` does all three on this machine."""


app.add_typer(profile.app, name="profile")
app.command()(plan.solve)
app.command()(plan.estimate)
app.command()(execute.validate)
app.command("export")(export.export_cmd)
app.command("export-weights")(export.export_weights_cmd)
app.command()(execute.tokenize)
app.command()(plan.show)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(execute.run)
app.command()(execute.demo)


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Each distinct :class:`AutoplanWarning` the library raises while active becomes one ``warning: ...``
    line on stderr once the command has succeeded (after its output; a failed command prints its one
    ``error:`` line alone); other warnings show as Python shows them."""
    import warnings

    from autoplan.errors import AutoplanWarning
    said: dict[str, None] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("always", AutoplanWarning)
        show_python = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            if issubclass(category, AutoplanWarning):
                said[str(message)] = None
            else:
                show_python(message, category, filename, lineno, file, line)
        warnings.showwarning = show
        yield
    for message in said:
        typer.echo(f"warning: {message}", err=True)


def _click_exceptions():
    """The module of the click exceptions that typer raises: ``click.exceptions`` up to typer 0.25, typer's own
    vendored copy from 0.26. Found through typer's public ``BadParameter`` (a click ``UsageError``) so that both
    work without importing either private module by name."""
    return sys.modules[typer.BadParameter.__module__]


def _usage_error(e) -> None:
    """click's usage line and help hint, then one ``error:`` line (click itself would write ``Error:``)."""
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        typer.echo(ctx.get_usage(), err=True)
        if ctx.help_option_names:
            typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    err(" ".join(e.format_message().split()))


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point: AutoplanError or a usage error -> one ``error:`` line and exit 2; Ctrl-C -> one line
    and exit 130 (SIGTERM: 143), after every process the command started has been ended
    (autoplan.processes); otherwise the command's exit code (``run`` passes on the workers')."""
    from autoplan.errors import Interrupted
    from autoplan.processes import forget_interrupts, interrupt_received, interrupts_raise
    forget_interrupts()
    try:
        # Not standalone: click would print usage errors its own way (rich boxes under typer) and let
        # AutoplanError through as a traceback. In this mode typer.Exit(code) comes back as the return value.
        # SIGINT/SIGTERM raise Interrupted (a BaseException that click and typer leave alone).
        with interrupts_raise(), _warnings_as_lines():
            code = app(args=argv, standalone_mode=False)
        swallowed = interrupt_received()
        if swallowed is not None:    # swallowed by a library, and the command ran on
            _interrupted(swallowed)
    except Interrupted as e:
        _interrupted(e.signum)
    except (KeyboardInterrupt, typer.Abort):
        _interrupted(2)
    except Exception as e:
        signum = interrupt_received()
        if signum is not None:      # the interrupt was swallowed by a library, which then failed
            _interrupted(signum)
        code = _exit_code(e)
    if code == 130:     # typer >= 0.26 turns Ctrl-C into Exit(130); click into Abort
        err("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


def _exit_code(e: Exception) -> object:
    """What an exception out of a command ends with: one ``error:`` line and exit 2 for bad input and
    usage errors, the code of ``typer.Exit``; anything else is a bug and goes on as a traceback."""
    clicks = _click_exceptions()
    try:
        raise e
    except AutoplanError as e:
        err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        sys.exit(2)
    except typer.Exit as e:
        return e.exit_code
    except clicks.UsageError as e:  # unknown option or command, missing or malformed value, bad choice
        if isinstance(e, getattr(clicks, "NoArgsIsHelpError", ())):  # bare `autoplan`: the help, as click shows it
            if e.format_message().strip():      # typer's rich help is already printed, the message is empty
                e.show()
            sys.exit(e.exit_code)
        _usage_error(e)
        sys.exit(2)
    except clicks.ClickException as e:  # e.g. a file option that cannot be opened
        err(" ".join(e.format_message().split()))
        sys.exit(2)


def _interrupted(signum: int) -> None:
    """End the processes the command started (a second Ctrl-C meanwhile is ignored), say so, exit."""
    import signal

    from autoplan.processes import end_descendants
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        end_descendants()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    err("interrupted")
    sys.exit(128 + signum)

