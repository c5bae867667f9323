"""The carried modules of the one file users copy. Python compiles a script run as
``__main__`` whole on every call, so the build (tools/bundle.py) puts the modules a
file-lock call never runs into that file as text: each server store, the listing, the
words of --help, waiting in line, holding a lock while work runs. A function that needs
one imports it where it is used (``from .waiting import _wait_for``); the build turns
that import into ``_compile_carried("waiting")``, which compiles the text once, in the
file's one namespace. In the package, nothing is carried and this is never called."""

from __future__ import annotations

# Filled by the build in the file users copy: a carried module's name -> the line of
# that file its text starts at, the carried modules it needs compiled first, and the
# text. Empty in the package.
_CARRIED: dict[str, tuple[int, tuple[str, ...], str]] = {}
_COMPILED: set[str] = set()


def _compile_carried(module: str) -> None:
    """Compile and run a carried module's text in this namespace (once), numbered as its
    lines stand in this file, so that tracebacks and coverage point at them."""
    if module in _COMPILED:
        return
    first, needs, source = _CARRIED[module]
    for need in needs:
        _compile_carried(need)
    import __future__

    where = globals().get("__file__", "<skf-run-lock>")
    # Its own future flags, not a caller's.
    flags = __future__.annotations.compiler_flag
    code = compile("\n" * (first - 1) + source, where, "exec", flags, dont_inherit=True)
    exec(code, globals())
    _COMPILED.add(module)
