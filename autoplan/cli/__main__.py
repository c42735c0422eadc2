"""``python -m autoplan.cli``: the ``autoplan`` command (also under torchrun, e.g. ``profile cluster``)."""

from autoplan.cli import main

main()
