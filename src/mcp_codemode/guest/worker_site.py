"""What ``site`` does at start-up, minus the code that .pth files and ``sitecustomize`` run.

Why: the worker starts with ``-S``. At start-up ``site`` adds the site-packages folders (where ``mcp-codemode
packages add`` installs numpy and the rest) and the folders their .pth files name, then runs every ``import``
line of every .pth file and ``sitecustomize``. On Debian's Python those lines import ``importlib.util``,
``contextlib``, ``collections`` and ``functools`` (about 0.65 MiB that every idle sandbox kept, docs/density.md)
for shims that do nothing in a sandbox: setuptools' distutils hack, a Python 2 namespace for matplotlib's
``mpl_toolkits`` (a package of its own today), apport's crash reporter. This does the rest with ``site``'s own
functions: a venv's prefix, the site-packages folders, the folders .pth files list, and ``exit``, ``quit``,
``help``, ``copyright``, ``credits`` and ``license``. What it leaves out, and why, is in docs/sandbox.md.
"""

from __future__ import annotations

import os
import sys


def set_up() -> None:
    """Give a worker started with ``-S`` the import path and built-ins it would have had without it."""
    if not sys.flags.no_site:
        return
    import site  # under -S, importing it runs nothing

    known = site.venv(site.removeduppaths()) or set()  # a venv: its prefix, and its site-packages, not the system's
    for folder in site.getsitepackages():
        if os.path.isdir(folder):
            _add_folder(folder, known)
    site.setquit()
    site.setcopyright()
    site.sethelper()


def _add_folder(folder: str, known: set[str]) -> None:
    """``site.addsitedir`` without the ``import`` lines: the folder, then each folder its .pth files name."""
    path, case = site_path(folder)
    if case not in known:
        sys.path.append(path)
        known.add(case)
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".pth") and not name.startswith("."))
    except OSError:
        return
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                continue
            path, case = site_path(folder, line)
            if case not in known and os.path.exists(path):
                sys.path.append(path)
                known.add(case)


def site_path(*parts: str) -> tuple[str, str]:
    """``site.makepath``: an absolute path and the form ``site`` compares paths in."""
    path = os.path.abspath(os.path.join(*parts))
    return path, os.path.normcase(path)
