"""The package's one base class for errors a user can fix.

Everything the package raises because of its input (a bad file, argument, shape, model, path, an
exhausted pool) derives from ``OscarKVError``; the CLI prints these as one line and exits with 2.
Anything else is a bug and keeps its traceback. Subclasses also derive from the builtin the caller
would expect (``ValueError`` for bad values, ``RuntimeError`` for state), so ``except ValueError``
keeps working.
"""

from __future__ import annotations


class OscarKVError(Exception):
    """Base class: a problem with the user's input, with a message that names the fix."""


class InputError(OscarKVError, ValueError):
    """A bad argument, shape, dtype, value or file content."""


class StateError(OscarKVError, RuntimeError):
    """An operation that the current state does not allow (e.g. a full pool)."""


class NotFoundError(OscarKVError, FileNotFoundError):
    """A file or folder the user named does not exist (or is not the kind of path expected)."""


class UnsupportedError(OscarKVError, NotImplementedError):
    """A valid request that this package does not implement (a model shape, a mode, a backend)."""
