"""Build a KernelBench-style candidate's extensions ahead of its GPU run, in the sandbox, with no GPU.

Copied into a private directory beside ``candidate.py`` and run there by the harness's Python (torch only, not
cudaperf), with ``TORCH_EXTENSIONS_DIR`` set to a fixed path in the run's private ``/tmp`` (the same path, the
same compilers and flags as the candidate's GPU run will have, so that the build there finds everything up to
date). It runs the candidate's module as the GPU runner does (its ``load_inline`` calls build as the module
runs), then copies the extensions directory to ``ext/`` in the working directory and writes ``build.json``:

    {"status": "ok" | "build_error" | "error", "message": "...", "seconds": float}

``build_error``: ``torch.utils.cpp_extension`` could not build an extension (the candidate's compile error);
``error``: the module failed otherwise (it may need the GPU that this run does not have: the GPU run decides).
Everything this process writes after the candidate's code ran is the candidate's to forge; the harness trusts
none of it beyond the candidate's own fate (it copies ``ext/`` without following links, and a forged
``build_error`` only fails the candidate itself).
"""

import json
import os
import shutil
import sys
import time
import traceback

BUILD_ERROR = "Error building extension"


def _special(d, names):
    """FIFOs, sockets and devices: not copied (a build leaves none)."""
    import stat

    return [n for n in names if not (stat.S_ISREG(m := os.lstat(os.path.join(d, n)).st_mode) or stat.S_ISDIR(m)
                                     or stat.S_ISLNK(m))]


def main() -> int:
    root = os.environ["TORCH_EXTENSIONS_DIR"]
    os.makedirs(root, exist_ok=True)
    t0 = time.monotonic()
    status, message = "ok", ""
    try:
        import torch  # noqa: F401 - imported before the candidate, as in the GPU runner

        ns = {"__name__": "cudaperf_candidate"}
        exec(compile(open("candidate.py").read(), "candidate.py", "exec"), ns)
    except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported
        text = f"{type(exc).__name__}: {exc}"
        status = "build_error" if BUILD_ERROR in text else "error"
        message = (text + "\n" + "".join(traceback.format_exc(limit=3)))[-4000:]
    seconds = time.monotonic() - t0
    sys.stdout.flush()
    shutil.copytree(root, "ext", symlinks=True, ignore=_special)
    with open("build.json", "w") as fh:
        json.dump({"status": status, "message": message, "seconds": round(seconds, 3)}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
