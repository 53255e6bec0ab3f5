"""Sandboxed ``ModelNew`` runs against the precompiled ``torch/extension.h`` they are given read-only
(:mod:`cudaperf.harness.torch_pch`; ``HarnessSettings.modelnew_pch``).

The directory is the harness's, shared by every candidate's build: a module that could rewrite a precompiled form,
add one (GCC takes any file in ``extension.h.gch/`` that fits the compilation), or change the header copy would
have every later candidate compile against its header. Each test runs a hostile probe (:data:`PROBE`, Python, as a
module is) in the real sandbox with the directory mounted as the harness mounts it (:func:`modelnew_env`'s
``CPATH``, :func:`modelnew_ro_paths`), and compares every file's hash, mode, owner and time before and after.

The directory is built by the real :func:`torch_pch.torch_pch` (its staging, header copy, modes and rename, in a
private cache) with the one-minute g++ precompilation replaced by small stand-in files: the layout is the
harness's, only the ``.gch`` contents are not g++'s (the real build is the slow test in
``tests/test_modelnew_build.py``). Every attack has a control: the same probe against a writable copy of the tree in
its own working directory succeeds, so an attack that "fails" for an unrelated reason cannot pass.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cudaperf.harness import modelnew_build as mb  # noqa: E402
from cudaperf.harness import sandbox as sb  # noqa: E402
from cudaperf.harness import torch_pch as tp  # noqa: E402
from cudaperf.harness.sandbox import (SandboxLimits, Workdir, base_level, private_tmp_available,  # noqa: E402
                                      run_sandboxed, scrubbed_env, share_file)

PRIVATE_ROOT = sb._private_root_works() if base_level() != "session" else "no mount namespace"
LANDLOCK = sb._landlock_abi()
needs_private_root = pytest.mark.skipif(PRIVATE_ROOT is not None, reason=f"no private root here: {PRIVATE_ROOT}")
needs_landlock = pytest.mark.skipif(isinstance(LANDLOCK, str) or sb._landlock_works() is not None,
                                    reason=f"no Landlock here: {LANDLOCK}")

PROBE = textwrap.dedent('''\
    import ctypes, errno, fcntl, json, os, sys, time


    def probe(root, lock, hold=None):
        """Every way to change the precompiled header's directory at ``root``, and its build lock; each attempt's
        outcome: "ok" or the errno's name. Forged files are made in the working directory (writable in every
        sandbox mode)."""
        gch = os.path.join(root, "torch", "extension.h.gch")
        v0, v1 = os.path.join(gch, "v0.gch"), os.path.join(gch, "v1.gch")
        header = os.path.join(root, "torch", "extension.h")
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}

        def attempt(name, fn):
            try:
                fn()
                out[name] = "ok"
            except OSError as e:
                out[name] = errno.errorcode.get(e.errno, str(e.errno))

        def write(path, mode="r+b", data=b"#define TORCH_EXTENSION_H_POISONED 1\\n"):
            with open(path, mode) as f:
                f.write(data)

        def forged(name):
            path = os.path.abspath("forged-" + name)
            write(path, "wb")
            return path

        def check(ret):
            if ret != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))

        # the controls: the directory is there and readable (the attacks aim at the right files)
        attempt("read v0.gch", lambda: open(v0, "rb").read())
        attempt("read header", lambda: open(header, "rb").read())
        # the precompiled forms
        attempt("overwrite v0.gch", lambda: write(v0))
        attempt("append to v0.gch", lambda: write(v0, "ab"))
        attempt("truncate v0.gch", lambda: os.truncate(v0, 0))
        attempt("open v0.gch O_TRUNC", lambda: os.close(os.open(v0, os.O_WRONLY | os.O_TRUNC)))
        attempt("chmod v0.gch", lambda: os.chmod(v0, 0o666))
        attempt("chown v0.gch", lambda: os.chown(v0, os.getuid(), os.getgid()))
        attempt("touch v0.gch", lambda: os.utime(v0, (0, 0)))
        attempt("replace v0.gch", lambda: os.replace(forged("v0"), v0))
        attempt("rename v0.gch", lambda: os.rename(v0, v0 + ".old"))
        attempt("delete v1.gch", lambda: os.unlink(v1))
        attempt("create v2.gch", lambda: write(os.path.join(gch, "v2.gch"), "xb"))
        attempt("move a file into the gch dir", lambda: os.rename(forged("v3"), os.path.join(gch, "v3.gch")))
        attempt("symlink into the gch dir", lambda: os.symlink(forged("v4"), os.path.join(gch, "v4.gch")))
        attempt("hard link into the gch dir", lambda: os.link(forged("v5"), os.path.join(gch, "v5.gch")))
        attempt("mkdir in the gch dir", lambda: os.mkdir(os.path.join(gch, "v6.gch")))
        attempt("mkfifo in the gch dir", lambda: os.mkfifo(os.path.join(gch, "v7.gch")))
        # the header copy, and the marker the harness reads
        attempt("overwrite header", lambda: write(header))
        attempt("append to header", lambda: write(header, "ab"))
        attempt("touch header", lambda: os.utime(header, (0, 0)))
        attempt("replace header", lambda: os.replace(forged("h"), header))
        attempt("delete done", lambda: os.unlink(os.path.join(root, "done")))
        # the directories
        attempt("rename the gch dir", lambda: os.rename(gch, gch + ".old"))
        attempt("rename the torch dir", lambda: os.rename(os.path.join(root, "torch"), os.path.join(root, "t")))
        attempt("rename the root", lambda: os.rename(root, root + ".old"))
        # the read-only mount itself
        attempt("unmount the root", lambda: check(libc.umount2(root.encode(), 2)))  # MNT_DETACH
        attempt("remount the root writable",
                lambda: check(libc.mount(None, root.encode(), None, ctypes.c_ulong(32 | 4096), None)))
        # the build lock: open (or create) it and hold it, so that the harness would block
        held = []

        def take_lock():
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError:
                fd = os.open(lock, os.O_RDONLY)  # a read-only descriptor takes a flock as well
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

        attempt("take the build lock", take_lock)
        attempt("list the cache", lambda: os.listdir(os.path.dirname(root)))
        if out["list the cache"] == "ok":
            out["cache entries"] = sorted(os.listdir(os.path.dirname(root)))
        if hold is not None:  # holding what it got until the harness has tried the lock
            open("holding", "w").close()
            deadline = time.monotonic() + 60
            while not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.05)
        return out
    ''')

RUN_PROBE = PROBE + textwrap.dedent('''\

    if __name__ == "__main__":
        result = probe(os.environ["CPATH"], sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
        with open("probe.json", "w") as fh:
            json.dump(result, fh)
    ''')

READS = {"read v0.gch", "read header"}
MOUNT = {"unmount the root", "remount the root writable"}
WRITES = {"overwrite v0.gch", "append to v0.gch", "truncate v0.gch", "open v0.gch O_TRUNC", "chmod v0.gch",
          "chown v0.gch", "touch v0.gch", "replace v0.gch", "rename v0.gch", "delete v1.gch", "create v2.gch",
          "move a file into the gch dir", "symlink into the gch dir", "hard link into the gch dir",
          "mkdir in the gch dir", "mkfifo in the gch dir", "overwrite header", "append to header", "touch header",
          "replace header", "delete done", "rename the gch dir", "rename the torch dir", "rename the root"}
"""Every attempt that changes the directory: all must fail."""
METADATA = {"chmod v0.gch", "chown v0.gch", "touch v0.gch", "touch header"}
"""Those of them that Landlock does not cover (a file's mode, owner and times)."""


def _fake_variants(exe: str, flags: list[str], out: Path) -> None:
    """Stands in for g++'s precompilation (:func:`torch_pch._build_variants`): a small file per variant."""
    for i, variant in enumerate(tp.VARIANTS):
        (out / f"v{i}.gch").write_bytes(f"stand-in precompiled torch/extension.h {i} {variant}\n".encode())


def _built(cache: Path, monkeypatch) -> Path:
    """The precompiled header's directory as :func:`torch_pch.torch_pch` builds it, in the cache ``cache``."""
    monkeypatch.setenv("CUDAPERF_CACHE", str(cache))
    monkeypatch.setattr(tp, "_build_variants", _fake_variants)
    tp._plan.cache_clear()
    tp.torch_pch.cache_clear()
    if isinstance(tp._plan(), str):
        pytest.skip(tp._plan())
    built = tp.torch_pch()
    assert built.root is not None and tp.ready_pch() == built.root, built.message
    assert tp._lock_path(built.root).is_file()  # left by the build, beside the directory
    return built.root


@pytest.fixture
def pch(tmp_path, monkeypatch) -> Path:
    """The directory in a private cache (under pytest's directory, which only the harness's user can enter)."""
    try:
        yield _built(tmp_path / "cache", monkeypatch)
    finally:
        tp._plan.cache_clear()
        tp.torch_pch.cache_clear()


@pytest.fixture
def open_pch(monkeypatch) -> Path:
    """The directory in a cache every user may enter (``/tmp/...``, mode 0755 on the way), as a harness whose
    cache lies on a shared path would have it."""
    d = Path(tempfile.mkdtemp(prefix="cudaperf-pch-test-"))
    d.chmod(0o755)
    try:
        yield _built(d / "cache", monkeypatch)
    finally:
        tp._plan.cache_clear()
        tp.torch_pch.cache_clear()
        shutil.rmtree(d, ignore_errors=True)


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): type, mode, owner, size, times, content hash."""
    out = {}
    for p in [root, *root.rglob("*")]:
        st = os.lstat(p)
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                                         st.st_size, st.st_mtime_ns, st.st_ctime_ns, digest)
    return out


def _probe(root: Path, lock: Path, *, hold: bool = False, level: str | None = None, py: str | None = None,
           **limits) -> tuple[dict, dict]:
    """The probe as a ``ModelNew`` module's GPU run is set up (its environment and read-only paths from
    :mod:`cudaperf.harness.modelnew_build`), run by ``py`` (the sandbox's Python unless given); with ``hold``, the
    harness tries the build lock (without waiting) while the probe holds whatever it got of it. (what the probe saw,
    what the harness saw)."""
    from cudaperf.harness.run_pytorch import sandbox_python

    if py is None:
        py, why = sandbox_python()
        assert why is None, why
    harness: dict = {}
    with Workdir() as w:
        (w / "probe.py").write_text(RUN_PROBE)
        share_file(w / "probe.py")
        argv = [py, "probe.py", str(lock)] + ([str(w / "go")] if hold else [])

        def observe(pid: int, ended: threading.Event) -> None:
            while not (w / "holding").exists() and not ended.wait(0.05):
                pass
            try:
                with open(lock, "rb") as fh:  # as torch_pch takes it, but without waiting
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    harness["lock"] = "ok"
            except OSError as e:
                harness["lock"] = errno.errorcode.get(e.errno, str(e.errno))
            (w / "go").touch()

        env = scrubbed_env(w, mb.modelnew_env(py, "sm_90", prebuilt=False, pch=root))
        limits.setdefault("wall_s", 120)
        r = run_sandboxed(argv, w, env=env, limits=SandboxLimits(ro_paths=mb.modelnew_ro_paths(root), **limits),
                          observe=observe if hold else None, level=level)
        assert r.returncode == 0, r.describe() + r.stderr[-2000:]
        assert not hold or (w / "holding").exists(), "the probe never got to hold the lock"
        return json.loads((w / "probe.json").read_text()), harness


def _control(root: Path) -> dict:
    """The same probe against a writable copy of the tree in its own working directory: every change succeeds."""
    from cudaperf.harness.run_pytorch import sandbox_python

    py, _ = sandbox_python()
    with Workdir() as w:
        copy = w / "copy"
        shutil.copytree(root, copy)
        for p in [copy, *copy.rglob("*")]:
            p.chmod(0o777 if p.is_dir() else 0o666)
            share_file(p)
        (w / "probe.py").write_text(RUN_PROBE)
        share_file(w / "probe.py")
        env = scrubbed_env(w, mb.modelnew_env(py, "sm_90", prebuilt=False, pch=copy))
        r = run_sandboxed([py, "probe.py", str(w / "lock")], w, env=env, limits=SandboxLimits(wall_s=120))
        assert r.returncode == 0, r.describe() + r.stderr[-2000:]
        return json.loads((w / "probe.json").read_text())


def _assert_untouched(root: Path, before: dict, seen: dict) -> None:
    assert all(seen[name] == "ok" for name in READS), seen  # it saw the directory at its path
    changed = {name: seen[name] for name in WRITES | MOUNT if seen[name] == "ok"}
    assert not changed, f"the sandboxed run changed the precompiled header's directory: {changed}"
    assert _snapshot(root) == before
    assert tp.ready_pch() == root  # the harness still takes it


@needs_private_root
def test_a_gpu_run_cannot_change_the_precompiled_header_or_hold_its_lock(pch):
    """The GPU run's set-up (:func:`modelnew_env`, :func:`modelnew_ro_paths`) in the private root: every change is
    refused, the files are as they were, and the build lock is not in the run's root (the harness takes it while
    the probe holds whatever it could get). The control: the same probe changes a writable copy."""
    control = _control(pch)
    assert all(control[name] == "ok" for name in READS | WRITES), control
    before = _snapshot(pch)
    seen, harness = _probe(pch, tp._lock_path(pch), hold=True)
    _assert_untouched(pch, before, seen)
    assert seen["take the build lock"] != "ok" and harness["lock"] == "ok", (seen, harness)
    # the directory's parent in the run's root is the way to it, nothing of the cache's
    assert seen.get("cache entries", [pch.name]) == [pch.name], seen


@needs_private_root
def test_the_read_only_mount_holds_where_the_files_modes_would_not(pch):
    """The run's user cannot write files owned by the harness's user mode 0444 anyway; the mount must hold alone
    (at ``user-namespaces`` level the run is root of its own namespace, where the harness's files are its own).
    With the tree opened to everyone (0666 files, 0777 directories), every change still fails, as a read-only
    file system, and the mount cannot be undone."""
    opened = [pch, *pch.rglob("*")]
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in opened}
    try:
        for p in opened:
            p.chmod(0o777 if p.is_dir() else 0o666)
        before = _snapshot(pch)
        seen, _ = _probe(pch, tp._lock_path(pch))
        assert all(seen[name] == "ok" for name in READS), seen
        assert not {name for name in WRITES | MOUNT if seen[name] == "ok"}, seen
        for name in ("overwrite v0.gch", "truncate v0.gch", "create v2.gch", "delete v1.gch", "overwrite header",
                     "replace header", "rename the gch dir"):
            assert seen[name] in ("EROFS", "EXDEV"), (name, seen[name])
        assert seen["overwrite v0.gch"] == "EROFS" and seen["unmount the root"] == "EPERM", seen
        assert _snapshot(pch) == before
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert tp.ready_pch() == pch


@needs_landlock
def test_the_landlock_fallback_keeps_the_content_and_the_harness_refuses_changed_metadata(pch):
    """Where no namespace can be had (``level="session"``: the run is the harness's own user, here root, so the
    files' modes hold nothing), Landlock limits writes to the working directory: no content changes, no entry is
    added, removed or renamed, and the lock beside the directory cannot be opened. Landlock does not cover a file's
    mode, owner or times (a gap of that level, for every file of the harness's user the run can name, not only
    these): the probe's chmod and utime succeed, and the harness then refuses the directory and builds it again."""
    assert "fs=landlock" in sb._plan(SandboxLimits(), None, level="session").level
    before = _snapshot(pch)
    seen, harness = _probe(pch, tp._lock_path(pch), hold=True, level="session")
    assert all(seen[name] == "ok" for name in READS), seen
    changed = {name for name in WRITES | MOUNT if seen[name] == "ok"}
    assert changed <= METADATA, f"the sandboxed run changed the precompiled header's directory: {changed}"
    assert seen["take the build lock"] == "EACCES" and harness["lock"] == "ok", (seen, harness)
    after = _snapshot(pch)
    assert after.keys() == before.keys() and all(after[k][-1] == before[k][-1] for k in before)  # content hashes
    assert {"chmod v0.gch", "touch header"} <= changed and after != before  # the gap, as it stands
    assert tp.ready_pch() is None  # refused: a mode and the header's time are not the harness's
    tp.torch_pch.cache_clear()
    assert tp.torch_pch().root == pch and tp.ready_pch() == pch


@pytest.mark.skipif(base_level() != "namespaces+nobody", reason="the harness does not run as root here")
def test_without_a_private_root_the_files_modes_and_the_lock_hold(open_pch):
    """With the private root switched off (``CUDAPERF_SANDBOX=-private_root``; a machine that refuses it and has
    no Landlock), the run sees the host's file system as a user of its own: the directory is left as it was by its
    modes (0444 files, 0755 directories, the harness's), and the build lock, which it can see, is mode 0600: it
    cannot open it to hold it (``open(..., "w")`` left it 0644, and a read-only descriptor can take a ``flock``)."""
    root = open_pch
    lock = tp._lock_path(root)
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert "fs=host" in sb._plan(SandboxLimits(private_root=False), None).level
    before = _snapshot(root)
    # the run's user must reach its Python on the host's file system: the system's (the harness's may lie in a
    # home only root enters); the probe needs only the standard library
    py = shutil.which("python3", path="/usr/bin:/bin")
    if py is None:
        pytest.skip("no system python3 for a run on the host's file system")
    seen, harness = _probe(root, lock, hold=True, private_root=False, py=py)
    _assert_untouched(root, before, seen)
    assert seen["take the build lock"] == "EACCES" and harness["lock"] == "ok", (seen, harness)
    assert lock.name in seen["cache entries"]  # the control: it did see the lock


@pytest.mark.skipif(not private_tmp_available(), reason="sandboxed runs get no private root here")
def test_a_modelnew_build_run_cannot_change_the_precompiled_header(pch, monkeypatch):
    """The build ahead (:func:`prebuild_modelnew`, with ``pch=True``: the harness's own :func:`modelnew_pch` finds
    the directory in the cache and mounts it) runs a module whose top level is the probe; the module's report comes
    back in its built tree. Nothing changed, and the next module's build is given the same directory."""
    monkeypatch.setattr(mb, "prebuild_unavailable", lambda: None)  # this torch has no CUDA (a C++-free module)
    module = f"import torch\nLOCK = {str(tp._lock_path(pch))!r}\n" + PROBE + textwrap.dedent('''
        d = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "cudaperf_pch_probe")
        os.makedirs(d)
        open(os.path.join(d, "build.ninja"), "w").write("# a build file\\n")
        with open(os.path.join(d, "probe.json"), "w") as fh:
            json.dump(dict(probe(os.environ["CPATH"], LOCK), cpath=os.environ["CPATH"]), fh)


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return x
        ''')
    before = _snapshot(pch)
    pre = mb.prebuild_modelnew(module, arch="sm_90", pch=True)
    assert pre.status == "ok", pre.message
    seen = json.loads((pre.ext / "cudaperf_pch_probe" / "probe.json").read_text())
    assert seen["cpath"] == str(pch)
    _assert_untouched(pch, before, seen)
    assert mb.modelnew_pch(True) == pch


@pytest.mark.parametrize("tamper", ["writable variant", "group-writable header", "touched header", "extra variant",
                                    "linked variant", "linked root", "foreign owner"])
def test_a_directory_changed_outside_the_harness_is_not_used(pch, tamper):
    """The cache is the harness's (no sandboxed run sees it), but what it finds there is checked before a run gets
    it: exactly the entries :func:`torch_pch` leaves, no links, each owned by the harness's user and writable by
    no other. A directory that fails is not given to runs (:func:`ready_pch`) and is built again."""
    gch = pch / "torch" / "extension.h.gch"
    forged = pch.parent / "forged"
    forged.mkdir()
    (forged / "v0.gch").write_text("#define POISONED 1\n")
    if tamper == "writable variant":
        (gch / "v0.gch").chmod(0o666)
    elif tamper == "touched header":  # #pragma once would no longer take it for PyTorch's own
        os.utime(pch / "torch" / "extension.h", (0, 0))
    elif tamper == "extra variant":
        shutil.copy(forged / "v0.gch", gch / "v2.gch")
        (gch / "v2.gch").chmod(0o444)
    elif tamper == "linked variant":
        (gch / "v1.gch").unlink()
        (gch / "v1.gch").symlink_to(forged / "v0.gch")
    elif tamper == "group-writable header":  # its content is not hashed: who could have written it is checked
        (pch / "torch" / "extension.h").unlink()
        (pch / "torch" / "extension.h").write_text("#define POISONED 1\n")
        (pch / "torch" / "extension.h").chmod(0o664)
    elif tamper == "linked root":
        shutil.copytree(pch, forged / "tree", symlinks=True)
        shutil.rmtree(pch)
        pch.symlink_to(forged / "tree")
    elif tamper == "foreign owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(gch / "v0.gch", sb.NOBODY_UID, sb.NOBODY_GID)
    assert tp.ready_pch() is None and mb.modelnew_pch(True, build=False) is None
    tp.torch_pch.cache_clear()
    again = tp.torch_pch()
    assert again.root == pch and "cached" not in again.message, again.message
    assert tp.ready_pch() == pch and not pch.is_symlink()
    assert sorted(p.name for p in gch.iterdir()) == [f"v{i}.gch" for i in range(len(tp.VARIANTS))]
    assert all(b"POISONED" not in p.read_bytes() for p in pch.rglob("*") if p.is_file())
    assert (forged / "v0.gch").read_text() == "#define POISONED 1\n"  # a link's target is left alone


def test_the_build_lock_is_not_followed_through_a_link(pch, tmp_path):
    """The lock file lies in the harness's cache; were a link put in its place, the build would not open (nor
    truncate, as ``open(..., "w")`` did) the file it points to: no precompiled header, and the target intact."""
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock = tp._lock_path(pch)
    lock.unlink()
    lock.symlink_to(target)
    shutil.rmtree(pch)  # so that the build takes the lock
    tp.torch_pch.cache_clear()
    built = tp.torch_pch()
    assert built.root is None and "symbolic links" in built.message, built.message
    assert target.read_text() == "keep me\n"
