"""The ``cudaperf`` command line: builds ``app`` and registers each command module listed in COMMAND_MODULES."""

from __future__ import annotations

from importlib import import_module

import typer

app = typer.Typer(
    help="cudaperf: evaluate and train models that turn sequential programs into fast, correct CUDA.",
    no_args_is_help=True,
    add_completion=False,
)

# The command modules, in the order `cudaperf --help` lists their commands. Each has register(app), which adds its
# commands or sub-app; a new module is one more name here. Heavy imports stay inside the command functions.
COMMAND_MODULES = ("harness", "dataset", "ranker", "eval", "train")

for _name in COMMAND_MODULES:
    import_module(f"{__name__}.{_name}").register(app)


def main() -> None:  # pragma: no cover
    app()


__all__ = ["app", "main"]
