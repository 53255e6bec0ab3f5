"""Every module in this package defines ``FAMILY``; :func:`all_families` collects them by name."""

from __future__ import annotations

import importlib
import pkgutil

from cudaperf.dataset.family import Family


def all_families() -> dict[str, Family]:
    out: dict[str, Family] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        fam = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "FAMILY", None)
        if not isinstance(fam, Family):
            raise TypeError(f"cudaperf.dataset.families.{mod.name} defines no FAMILY = Family(...)")
        if fam.name in out:
            raise ValueError(f"two families are named {fam.name!r}")
        out[fam.name] = fam
    return out
