"""Stage 1 of the method: the offline pairwise ranker over structural features (PAPER-SPEC §3)."""

from pathlib import Path as _Path

BUILTIN_RANKER = _Path(__file__).resolve().parent.parent / "data" / "ranker"
"""The ranker shipped in the package: ``cudaperf ranker train --out cudaperf/data/ranker`` on the shipped dataset
(the task split's training part, seed 0; its ``ranker.json`` names the dataset version). The default R_str of
``cudaperf eval`` and ``cudaperf train`` when no ``--ranker`` is given; it has seen no task of the test split."""


def builtin_ranker_dir() -> _Path:
    """The shipped ranker's directory (FileNotFoundError, saying how to rebuild it, when it is missing)."""
    if not (BUILTIN_RANKER / "ranker.json").exists():
        raise FileNotFoundError(f"the shipped ranker is missing from {BUILTIN_RANKER}: rebuild it with "
                                "`cudaperf ranker train --out cudaperf/data/ranker`")
    return BUILTIN_RANKER
