"""Files the package reads and writes: checked before the work, written whole.

* ``check_output_path`` runs *before* long work (calibration, evaluation) and proves that the file
  can be created where the user asked: not a directory, its folder creatable, and a probe file can
  really be created there (``os.access`` says yes to root even on /proc).
* ``check_input_file`` refuses a missing path or a directory with one line.
* ``check_distinct_paths`` refuses an output that is one of the command's inputs or another output.
* ``source_commit`` names the code a results file came from.
* ``atomic_write`` writes to a temporary name in the destination folder and renames it over the
  destination, so a crash, Ctrl-C or SIGTERM never leaves a half-written file in place of a good one,
  and never leaves the temporary file behind. The result honours the umask (``mkstemp`` alone would
  give 0600) and keeps the mode of a file it replaces.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Callable

from .errors import InputError, NotFoundError


def source_commit() -> str:
    """The commit of the code that runs, for results files: ``OSCARKV_COMMIT`` where set (the GPU machine's copy
    of the tree carries stale git metadata: its HEAD is not the tree's commit), else ``git rev-parse`` of the
    package's checkout, else "unknown"."""
    if os.environ.get("OSCARKV_COMMIT"):
        return os.environ["OSCARKV_COMMIT"]
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _first_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output_path(path, what: str = "output", suffix: str | tuple[str, ...] | None = None) -> Path:
    """Refuse (``InputError``) an output path that cannot be written, before any work is done.

    Creates no folder and leaves no file behind (the probe is removed)."""
    if path is None or str(path) == "":
        raise InputError(f"{what}: empty path; pass a file name")
    p = Path(path)
    if suffix is not None:
        sfx = (suffix,) if isinstance(suffix, str) else tuple(suffix)
        if p.suffix.lower() not in sfx:
            raise InputError(f"{what} {p} should end in {' or '.join(sfx)}")
    if p.is_dir():
        raise InputError(f"{what} {p} is a directory; pass a file name inside it (e.g. {p / ('out' + (p.suffix or '.json'))})")
    if p.exists() and not p.is_file():
        raise InputError(f"{what} {p} exists and is not a regular file")
    base = _first_existing(p.parent if str(p.parent) else Path("."))
    if not base.is_dir():
        raise InputError(f"{what} {p}: {base} is a file, not a folder")
    _probe_writable(base, p, what)
    return p


def _probe_writable(base: Path, p: Path, what: str) -> None:
    """Create and remove a probe file in ``base`` (permission bits alone mislead when running as root)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".oscarkv-probe.", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"{what} {p} cannot be written ({e.strerror or e} in {base}); choose another location") from None


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)  # hard links and symlinks too
        return a.resolve() == b.resolve()
    except OSError:
        return False


def check_distinct_paths(outputs: dict, inputs: dict | None = None) -> None:
    """Refuse an output that is one of the command's inputs (``{flag: path}``, None = not given) or another
    output: the atomic write would replace the input (e.g. ``inspect ROT --json ROT`` lost the rotation
    file) or the second output the first."""
    outs = [(k, Path(v)) for k, v in outputs.items() if v]
    ins = [(k, Path(v)) for k, v in (inputs or {}).items() if v]
    for i, (name, p) in enumerate(outs):
        for other, q in ins + outs[:i]:
            if _same(p, q):
                raise InputError(f"{name} {p} is also {other}: writing it would {'replace' if (other, q) in ins else 'overwrite'} "
                                 f"that file; choose another name")


def check_output_dir(path, what: str = "output folder") -> Path:
    """Like ``check_output_path`` for a folder the command will create or fill."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {p} exists and is not a folder")
    base = _first_existing(p)
    if not base.is_dir():
        raise InputError(f"{what} {p}: {base} is a file, not a folder")
    _probe_writable(base, p, what)
    return p


def check_input_file(path, what: str = "input file", hint: str = "") -> Path:
    """A path that must be an existing regular file (one line otherwise)."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"{what} {p} does not exist" + (f"; {hint}" if hint else ""))
    if p.is_dir():
        raise InputError(f"{what} {p} is a directory; pass a file")
    return p


def _umask() -> int:
    # os.umask can only be read by setting it; done under a lock so two writers cannot race on it
    with _UMASK_LOCK:
        m = os.umask(0)
        os.umask(m)
    return m


_UMASK_LOCK = threading.Lock()


class _Terminated(BaseException):
    """SIGTERM turned into an exception while a file is being written (so the temp file is removed)."""


@contextlib.contextmanager
def _sigterm_unwinds():
    """While writing, make SIGTERM unwind the stack (cleanup runs) and then terminate as SIGTERM would."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        old = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):
        yield
        return
    if old not in (signal.SIG_DFL, None):  # someone (e.g. the CLI) already handles SIGTERM: keep theirs
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # die the way the sender expected, after cleanup
        raise
    finally:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, old)


def atomic_write(path, write: Callable[[str], None]) -> Path:
    """``write(tmp_path)`` then rename over ``path``; the temp file never survives a failure or SIGTERM."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory; pass a file name inside it")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    tmp = None
    with _sigterm_unwinds():
        try:
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
            os.close(fd)
            write(tmp)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
            tmp = None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
    return path
