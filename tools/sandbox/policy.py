"""The AST policy: the first fence in front of the sandbox, never the only one.

It refuses, before anything runs, what an analysis script has no reason to do: imports off the
allow-list, dunder names and attributes (the ``().__class__.__subclasses__()`` family of escapes),
the builtins that reach around the list (``eval``, ``exec``, ``open``, ``getattr`` ...) and the
write/export calls (``to_csv``, ``savefig`` ...). What it misses, the sandbox stops: no network, a
read-only filesystem, limits (tests/tools/sandbox/ run each attack with the policy off too).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_MODULES = frozenset(
    {
        "pandas",
        "numpy",
        "matplotlib",
        "math",
        "statistics",
        "datetime",
        "json",
        "re",
        "collections",
        "itertools",
        "functools",
        "operator",
        "decimal",
        "fractions",
        "random",
        "string",
        "textwrap",
        "calendar",
        "zoneinfo",
        "dataclasses",
        "typing",
        "heapq",
        "bisect",
        "time",
    }
)
# Submodules of allowed packages that reach files, processes or the network.
BLOCKED_SUBMODULES = frozenset({"numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "pandas.io"})
BLOCKED_NAMES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "open",
        "input",
        "breakpoint",
        "help",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "dir",
        "memoryview",
        "exit",
        "quit",
    }
)
# Methods that write or export: results leave as the ``result`` table and open figures only.
BLOCKED_CALLS = frozenset(
    {
        "to_csv",
        "to_excel",
        "to_parquet",
        "to_pickle",
        "to_json",
        "to_hdf",
        "to_feather",
        "to_sql",
        "to_stata",
        "to_orc",
        "to_xml",
        "to_clipboard",
        "to_html",
        "to_latex",
        "tofile",
        "savefig",
        "save",
        "savez",
        "savez_compressed",
        "savetxt",
        "write",
        "write_text",
        "write_bytes",
        "writelines",
        "read_pickle",
        "load",
        "system",
        "popen",
    }
)


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class PolicyViolation(Exception):
    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("; ".join(str(v) for v in violations))


def _dunder(name: str) -> bool:
    return name.startswith("__")


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def _refuse(self, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    def _module(self, node: ast.AST, name: str) -> None:
        top = name.split(".", maxsplit=1)[0]
        if top not in ALLOWED_MODULES:
            allowed = ", ".join(sorted(ALLOWED_MODULES))
            self._refuse(node, f"import of {name!r} is not allowed (allowed: {allowed})")
        elif any(name == b or name.startswith(b + ".") for b in BLOCKED_SUBMODULES):
            self._refuse(node, f"import of {name!r} is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._refuse(node, "relative imports are not allowed")
            return
        module = node.module or ""
        self._module(node, module)
        for alias in node.names:
            if alias.name == "*" or _dunder(alias.name):
                self._refuse(node, f"'from {module} import {alias.name}' is not allowed")
            else:
                self._module(node, f"{module}.{alias.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _dunder(node.attr):
            self._refuse(node, f"access to the attribute {node.attr!r} is not allowed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if _dunder(node.id):
            self._refuse(node, f"the name {node.id!r} is not allowed")
        elif node.id in BLOCKED_NAMES:
            self._refuse(node, f"{node.id}() is not allowed")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in BLOCKED_CALLS:
            self._refuse(
                node, f".{func.attr}() is not allowed: leave a table in `result`, charts open"
            )
        self.generic_visit(node)

    def _binds(self, node: ast.AST, name: str) -> None:
        if _dunder(name):
            self._refuse(node, f"the name {name!r} is not allowed")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._binds(node, node.name)
        self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._refuse(node, "async code is not allowed")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._binds(node, node.name)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._binds(node, node.arg)

    def visit_Global(self, node: ast.Global) -> None:
        self._refuse(node, "global is not allowed")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._refuse(node, "nonlocal is not allowed")

    def visit_Constant(self, node: ast.Constant) -> None:
        # A dunder in a string reaches attributes through what the policy cannot see (a format
        # spec, operator.attrgetter): refused wherever it is written.
        if isinstance(node.value, str) and "__" in node.value:
            self._refuse(node, "strings containing '__' are not allowed")


def check(code: str, *, max_bytes: int = 100 * 1024) -> list[Violation]:
    """The policy's refusals of ``code``, in source order; empty when it may run."""
    if len(code.encode()) > max_bytes:
        return [Violation(0, f"the script is longer than {max_bytes} bytes")]
    try:
        tree = ast.parse(code, filename="<script>")
    except SyntaxError as error:
        return [Violation(error.lineno or 0, f"syntax error: {error.msg}")]
    checker = _Checker()
    checker.visit(tree)
    return checker.violations


def enforce(code: str, *, max_bytes: int = 100 * 1024) -> None:
    violations = check(code, max_bytes=max_bytes)
    if violations:
        raise PolicyViolation(violations)
