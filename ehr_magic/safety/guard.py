"""The code guard: a static check of model-written Python before it runs automatically.

``check_code(code)`` parses the code (it never runs it) and reports every use of:

* modules outside an allow-list (polars, numpy, math, datetime, re, json, ...);
* the file system, processes, the network and the import machinery (``open``, ``os``,
  ``subprocess``, ``socket``, ``importlib``, ``__import__``...), also when reached as
  an attribute of an allowed module (``pl.os``, ``statistics.sys``);
* dynamic code and reflection (``eval``, ``exec``, ``compile``, ``globals``, ``vars``,
  ``getattr`` with a computed or private name, any ``__dunder__``, frame and code objects);
* dataframe readers and writers (``pl.read_*``, ``scan_*``, ``write_*``, ``sink_*``,
  ``np.save``, ``savefig``...);
* private attributes (``ehr._con``) and changes to the ``ehr`` object;
* SQL that is not a read, wherever it appears: literals, f-strings, concatenations,
  names assigned earlier, and text hidden in ``chr()`` codes or bytes (see ``strings``);
* catching ``BaseException`` (it would swallow the executor's time limit) and
  constant expressions that would exhaust memory or CPU (``'x' * 10**10``, ``9**9**9``).

This is defence in depth, not a sandbox: Python offers too many routes to enumerate,
and code the check cannot read (names bound at run time) gets the benefit of the doubt.
What keeps the data safe regardless is that the database connection is read-only, with
external access disabled and its configuration locked, and that the executor limits time,
output and memory. The analyst's own cells are never checked.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ehr_magic.safety import sql as sqlcheck
from ehr_magic.safety.flow import Flow
from ehr_magic.safety.strings import Folded, Folder, contains_obfuscation, int_value, pow_bits

ALLOWED_MODULES = frozenset({
    "polars", "numpy", "numpy.linalg", "numpy.random", "math", "cmath", "statistics", "datetime", "re", "json",
    "collections", "collections.abc", "itertools", "functools", "decimal", "fractions", "typing", "dataclasses",
    "matplotlib", "matplotlib.pyplot", "matplotlib.dates", "matplotlib.ticker", "matplotlib.colors", "textwrap",
    "string", "operator", "calendar", "random", "heapq", "bisect", "enum", "numbers", "copy", "zoneinfo", "warnings",
    "pprint", "scipy.stats",
})

_OS = "generated code may not use the operating system or files; use ehr.sql and polars"
_NET = "generated code may not use the network"
_IMPORTS = "generated code may not use the import machinery"
_INTERNALS = "generated code may not inspect or change the interpreter"
_DB = "generated code reaches the database only through the ehr object (ehr.sql, ehr.table)"
_MODULE_REASONS = {
    **dict.fromkeys(("os", "posix", "nt", "sys", "subprocess", "shutil", "pathlib", "tempfile", "glob", "io", "fcntl",
                     "pty", "tty", "termios", "signal", "resource", "mmap", "platform", "sysconfig", "site", "atexit",
                     "multiprocessing", "concurrent", "threading", "_thread", "asyncio", "selectors", "webbrowser",
                     "zipfile", "tarfile", "gzip", "bz2", "lzma", "shelve", "dbm", "sqlite3", "logging", "fileinput",
                     "filecmp", "linecache", "tokenize", "plr", "catalog"), _OS),
    **dict.fromkeys(("socket", "ssl", "urllib", "urllib3", "http", "httpx", "requests", "ftplib", "smtplib", "poplib",
                     "imaplib", "telnetlib", "xmlrpc", "email", "socketserver", "aiohttp"), _NET),
    **dict.fromkeys(("importlib", "builtins", "runpy", "pkgutil", "zipimport", "imp", "code", "codeop", "marshal",
                     "pickle", "copyreg", "codecs", "base64", "binascii"), _IMPORTS),
    **dict.fromkeys(("ctypes", "inspect", "gc", "types", "weakref", "traceback", "faulthandler", "tracemalloc", "dis",
                     "ast", "cffi", "ctypeslib", "f2py", "distutils", "testing", "plugins"), _INTERNALS),
    **dict.fromkeys(("duckdb", "sqlalchemy", "pyarrow", "pandas"), _DB),
}
# Names an attribute may not have, even on an allowed module (pl.os, statistics.sys, np.ctypeslib).
_MODULE_ATTRIBUTES = frozenset(_MODULE_REASONS) - {"code", "types", "io", "testing", "site", "glob", "signal",
                                                    "platform", "email", "resource", "catalog"} | {"io", "catalog"}
# Names that are dangerous as bare names (from a shared namespace) unless the code assigns them.
_MODULE_NAMES = frozenset(_MODULE_REASONS) - {"code", "types", "site", "glob", "signal", "platform", "email",
                                               "resource", "testing", "catalog", "plr", "plugins", "ast", "dis"}

_DYNAMIC = "generated code may not run dynamically built code"
_BUILTINS = {
    "open": "generated code may not open files; query the database with ehr.sql",
    "eval": _DYNAMIC, "exec": _DYNAMIC, "compile": _DYNAMIC, "__import__": _IMPORTS,
    "globals": "generated code may not inspect namespaces", "locals": "generated code may not inspect namespaces",
    "vars": "generated code may not inspect namespaces", "dir": "generated code may not inspect namespaces",
    "breakpoint": "generated code may not wait for input", "input": "generated code may not wait for input",
    "help": "generated code may not wait for input", "exit": "generated code may not stop the kernel",
    "quit": "generated code may not stop the kernel", "memoryview": _INTERNALS,
    "setattr": "generated code may not set attributes by name",
    "delattr": "generated code may not delete attributes by name",
}
_GETTERS = {"getattr", "hasattr", "attrgetter", "methodcaller"}
_FRAME_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "f_globals",
    "f_locals", "f_builtins", "f_back", "f_code", "f_trace", "tb_frame", "tb_next", "co_code", "co_consts", "co_names",
    "func_globals", "func_code", "im_func", "im_self", "_getframe", "currentframe", "getouterframes", "getinnerframes",
})
_WRITE = "generated code may not write files; put the result in `answer`"
_READ = "generated code may not read files; query the database with ehr.sql or ehr.table"
_FILE_ATTRIBUTES = {
    **dict.fromkeys(("to_csv", "to_parquet", "to_excel", "to_pickle", "to_feather", "to_hdf", "to_sql", "to_stata",
                     "to_clipboard", "tofile", "save", "savez", "savez_compressed", "savetxt", "savefig", "imsave",
                     "dump", "serialize", "save_to_file", "show_graph", "open_memmap", "memmap"), _WRITE),
    **dict.fromkeys(("load", "loadtxt", "genfromtxt", "fromfile", "imread", "deserialize", "load_from_file", "npyio",
                     "DataSource", "fromregex", "from_file", "iterdir", "rglob"), _READ),
    **dict.fromkeys(("open", "unlink", "rename", "rmdir", "mkdir", "touch", "chmod", "lchmod", "symlink_to",
                     "hardlink_to", "link_to", "chown", "truncate_file"), _OS),
    **dict.fromkeys(("get_type_hints", "ForwardRef", "register_plugin_function", "register_io_source", "extbuild",
                     "build_and_import_extension"), _INTERNALS),
    **dict.fromkeys(("close", "interrupt"), None),  # only on ehr, see below
}
_WRITER = re.compile(r"^(write|sink)_\w+$")
_READER = re.compile(r"^(read|scan)_\w+$")
_ALLOWED_PRIVATE = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})
_ALLOWED_DUNDER_DEFS = frozenset({"__init__", "__post_init__", "__repr__", "__str__"})
_SWALLOWING = {"BaseException", "KeyboardInterrupt", "SystemExit", "GeneratorExit"}
_DUNDER = re.compile(r"__\w+__")
_FORMAT_PRIVATE = re.compile(r"\{[^{}]*(\.\s*_|\[\s*_)[^{}]*\}")
_MAX_ELEMENTS = 10**8  # a constant repetition or allocation beyond this is refused
_MAX_POW_BITS = 10**6


@dataclass(frozen=True)
class Violation:
    """One rule broken at one line; ``message`` is a single sentence starting ``line N:``."""

    # syntax | import | builtin | reflection | dunder | private | module | file | ehr | sql | resource | exception
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class GuardReport:
    """The outcome of ``check_code``: ``allowed`` when there is no violation.

    ``notes`` lists what the check could not verify (e.g. SQL built entirely from
    variables); such code may run, and the database's own read-only mode applies.
    """

    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.violations

    @property
    def syntax_error(self) -> bool:
        """The code does not parse. Nothing can run; the executor reports the usual SyntaxError,
        so a caller may pass such code on to it instead of reporting a block."""
        return bool(self.violations) and all(v.rule == "syntax" for v in self.violations)

    @property
    def flagged(self) -> bool:
        """Blocked, or something could not be verified (for a review-if-flagged run mode)."""
        return bool(self.violations or self.notes)

    def describe(self) -> str:
        """The text fed back to the model (and shown to the analyst) for a blocked run."""
        if self.allowed:
            return "The code passed the safety check."
        lines = "\n".join(f"- {v.message}" for v in self.violations)
        return ("The code was not run because the safety check does not allow it:\n" + lines + "\n"
                "Rewrite it to read the data with ehr.sql (read queries only) or ehr.table and polars, "
                "without files, processes, the network or interpreter internals.")


def check_code(code: str) -> GuardReport:
    """Statically check model-written Python ``code``; nothing is executed."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        line = exc.lineno or 1
        return GuardReport([Violation("syntax", line, f"line {line}: the code is not valid Python ({exc.msg}), so it "
                                      "cannot be checked or run")])
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return GuardReport([Violation("syntax", 1, f"line 1: the code cannot be parsed ({type(exc).__name__}), so it "
                                      "cannot be checked or run")])
    checker = _Checker(code, tree)
    try:
        checker.run()
    except RecursionError:
        checker.add("syntax", 1, "line 1: the code is nested too deeply to be checked")
    return GuardReport(checker.violations, checker.notes)


class _Checker:
    def __init__(self, code: str, tree: ast.Module) -> None:
        self.code, self.tree = code, tree
        self.violations: list[Violation] = []
        self.notes: list[str] = []
        self._seen: set[tuple[int, str]] = set()
        self.assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.assigned |= {a.arg for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                          for a in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs)}
        self.module_aliases: dict[str, str] = {}  # local name -> imported module
        self.sql_aliases: set[str] = set()  # names bound to ehr.sql
        self.approved_getters: set[int] = set()

    # -- reporting ------------------------------------------------------------------------

    def add(self, rule: str, line: int, message: str) -> None:
        key = (line, message)
        if key not in self._seen:
            self._seen.add(key)
            self.violations.append(Violation(rule, line, message))

    def deny(self, rule: str, node: ast.AST, reason: str, snippet: str | None = None) -> None:
        line = getattr(node, "lineno", 1)
        shown = snippet if snippet is not None else _snippet(node)
        self.add(rule, line, f"line {line}: `{shown}` is not allowed: {reason}")

    # -- the walk -------------------------------------------------------------------------

    def run(self) -> None:
        for node in ast.walk(self.tree):
            method = getattr(self, f"visit_{type(node).__name__}", None)
            if method is not None:
                method(node)
        Flow(self).block(self.tree.body)
        self.violations.sort(key=lambda v: v.line)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name, f"import {alias.name}")
            self.module_aliases[alias.asname or alias.name.split(".")[0]] = alias.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.deny("import", node, "generated code may only import allowed modules", _snippet(node))
            return
        module = node.module or ""
        if module not in ALLOWED_MODULES and not all(f"{module}.{a.name}" in ALLOWED_MODULES for a in node.names):
            self._module(node, module, f"from {module} import ...")
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name in _MODULE_REASONS or (full not in ALLOWED_MODULES and alias.name in {"ctypeslib", "f2py"}):
                self.deny("import", node, _MODULE_REASONS.get(alias.name, _INTERNALS),
                          f"from {module} import {alias.name}")
            self._attribute_name(node, alias.name, root=None)
            self.module_aliases[alias.asname or alias.name] = full

    def _module(self, node: ast.AST, name: str, shown: str) -> None:
        if name in ALLOWED_MODULES:
            return
        top = name.split(".")[0]
        reason = _MODULE_REASONS.get(top) or next(
            (_MODULE_REASONS[p] for p in name.split(".") if p in _MODULE_REASONS), None)
        if reason is None:
            allowed = ", ".join(sorted(m for m in ALLOWED_MODULES if m.rpartition(".")[0] not in ALLOWED_MODULES))
            reason = f"generated code may only import these modules: {allowed}"
        self.deny("import", node, reason, shown)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if _DUNDER.fullmatch(name):
            self.deny("dunder", node, "generated code may not use double-underscore names, which reach interpreter "
                      "internals")
        elif name in _BUILTINS and name not in self.assigned:
            self.deny("builtin", node, _BUILTINS[name])
        elif name in _GETTERS and id(node) not in self.approved_getters and name not in self.assigned:
            self.deny("reflection", node, "attributes must be named directly (obj.name); getattr-style access with "
                      "computed or private names can reach interpreter internals")
        elif name in _MODULE_NAMES and name not in self.assigned:
            self.deny("module", node, _MODULE_REASONS[name])
        elif name == "ehr" and isinstance(node.ctx, (ast.Store, ast.Del)):
            shown = "ehr = ..." if isinstance(node.ctx, ast.Store) else "del ehr"
            self.deny("ehr", node, "generated code may not rebind or delete `ehr`", shown)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = _root_name(node)
        self._attribute_name(node, node.attr, root)
        if root == "ehr" and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.deny("ehr", node, "generated code may not change the ehr object")
        if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == "type":
            self.deny("reflection", node, "generated code may not reach into classes through type(); use the object")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _root_name(node) == "ehr" and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.deny("ehr", node, "generated code may not change the ehr object")

    def _attribute_name(self, node: ast.AST, attr: str, root: str | None) -> None:
        if _DUNDER.fullmatch(attr):
            self.deny("dunder", node, "generated code may not use double-underscore attributes, which reach "
                      "interpreter internals")
        elif attr.startswith("_") and attr not in _ALLOWED_PRIVATE:
            if root == "ehr":
                self.deny("private", node, "generated code may use only the public ehr API (ehr.sql, ehr.table, "
                          "ehr.lookup, ehr.describe, ehr.now...)")
            else:
                self.deny("private", node, "generated code may not use private attributes")
        elif attr in _FRAME_ATTRIBUTES:
            self.deny("reflection", node, "generated code may not walk stack frames or code objects")
        elif attr in _MODULE_ATTRIBUTES:
            self.deny("module", node, _MODULE_REASONS[attr])
        elif _WRITER.match(attr):
            self.deny("file", node, _WRITE)
        elif _READER.match(attr):
            self.deny("file", node, _READ)
        elif root == "ehr" and attr == "path":
            self.deny("ehr", node, "generated code may not use the database file's path; query it with ehr.sql")
        elif attr in _FILE_ATTRIBUTES:
            reason = _FILE_ATTRIBUTES[attr]
            if reason is None:
                if root in ("ehr", "type") or attr == "interrupt":
                    self.deny("ehr", node, "generated code may not close or interrupt the analyst's database "
                              "connection")
            else:
                self.deny("file" if reason in (_WRITE, _READ) else "reflection" if reason == _INTERNALS else "module",
                          node, reason)
        elif root == "ehr" and attr in ("update", "pop", "popitem", "clear", "setdefault") \
                and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            self.deny("ehr", node, "generated code may not change the ehr object")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _GETTERS:
            if name in ("getattr", "hasattr"):
                names = node.args[1:2]
            else:
                names = node.args[:1] if name == "methodcaller" else node.args
            owner = _root_name(node.args[0]) if name in ("getattr", "hasattr") and node.args else None
            named = [a for a in names if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value
                     and not any(part.startswith("_") for part in a.value.split("."))]
            # every name a plain public constant (getattr without a name has none: refused)
            if len(named) == len(names) and (names or name not in ("getattr", "hasattr")):
                if isinstance(func, ast.Name):
                    self.approved_getters.add(id(func))
                elif isinstance(func, ast.Attribute):
                    pass  # operator.attrgetter('x'): the attribute itself is fine
                for a in named:
                    for part in str(a.value).split("."):
                        self._attribute_name(a, part, owner)
            else:
                self.deny("reflection", node, "attributes must be named directly; getattr-style access with computed "
                          "or private names can reach interpreter internals")
        if name == "join":
            positional = node.args[2] if len(node.args) > 2 else None  # join(other, on, how)
            how = next((k.value for k in node.keywords if k.arg == "how"), positional)
            if isinstance(how, ast.Constant) and how.value == "cross":
                self.deny("resource", node, "a cross join multiplies rows and can exhaust the kernel's memory; "
                          "join on a key or aggregate first")
        self._resource_call(node, name)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if _DUNDER.search(text) or _FORMAT_PRIVATE.search(text):
                self.deny("dunder", node, "strings naming double-underscore or private attributes can reach "
                          "interpreter internals", _short(repr(node.value)))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Pow) and pow_bits(node) > _MAX_POW_BITS:
            self.deny("resource", node, "this integer would have millions of digits, and computing it cannot be "
                      "interrupted")
        if isinstance(node.op, ast.LShift):
            shift = int_value(node.right)
            if shift is not None and shift > _MAX_POW_BITS:
                self.deny("resource", node, "this integer would have millions of digits, and computing it cannot be "
                          "interrupted")
        if isinstance(node.op, ast.Mult):
            for sequence, count in ((node.left, node.right), (node.right, node.left)):
                size = _literal_size(sequence)
                n = int_value(count)
                if size and n is not None and size * n > _MAX_ELEMENTS:
                    self.deny("resource", node, f"it would build a value of about {_human(size * n)} elements or "
                              "characters in memory; compute on the data in SQL instead")
                    break

    def _resource_call(self, node: ast.Call, name: str) -> None:
        args = node.args
        if name in _MATERIALISING and args and isinstance(args[0], ast.Call) and _infinite(args[0]):
            self.deny("resource", node, "it consumes an endless iterator inside one call, which neither the time "
                      "limit nor the memory limit can stop; loop with a bound instead")
            return
        size: int | None = None
        if name in ("list", "tuple", "set", "frozenset", "sorted", "bytearray", "bytes", "sum", "max", "min",
                    "fromkeys") and args and isinstance(args[0], ast.Call) and _call_name(args[0]) == "range":
            size = _range_size(args[0])
            if name in ("sum", "max", "min"):  # no memory, but minutes of CPU in one C call
                size = size if size and size > 10 * _MAX_ELEMENTS else None
        elif name in ("bytearray", "bytes") and len(args) == 1:
            size = int_value(args[0])
        elif name in ("zeros", "ones", "empty", "full", "arange", "int_range", "repeat", "int_ranges", "linspace"):
            shape = args[0] if name in ("zeros", "ones", "empty", "full") and args else None
            if shape is not None and isinstance(shape, (ast.Tuple, ast.List)):
                dims = [int_value(e) for e in shape.elts]
                size = _product(dims) if all(d is not None for d in dims) else None
            elif shape is not None:
                size = int_value(shape)
            elif name in ("arange", "int_range") and args:
                bounds = [b for b in (int_value(a) for a in args[:2]) if b is not None]
                if len(bounds) == len(args[:2]):
                    size = bounds[-1] - (bounds[0] if len(bounds) == 2 else 0)
            elif name == "repeat" and len(args) >= 2:
                size = int_value(args[1])
            elif name == "linspace" and len(args) >= 3:
                size = int_value(args[2])
        elif name == "factorial" and args:
            value = int_value(args[0])
            size = value * 100 if value is not None and value > 10**5 else None
        if size is not None and size > _MAX_ELEMENTS:
            self.deny("resource", node, f"it would build about {_human(size)} values in memory; compute on the data in "
                      "SQL instead")

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        names = [] if node.type is None else node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        caught = [n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else "" for n in names]
        if node.type is None or any(c in _SWALLOWING for c in caught):
            shown = "except:" if node.type is None else f"except {ast.unparse(node.type)}"
            self.deny("exception", node, "it would also catch the executor's time limit and keep a runaway run going; "
                      "catch Exception instead", shown)

    def visit_Raise(self, node: ast.Raise) -> None:
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(target, ast.Name) and target.id in _SWALLOWING:
            self.deny("exception", node, "generated code may not stop the kernel; raise an Exception subclass")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _DUNDER.fullmatch(node.name) and node.name not in _ALLOWED_DUNDER_DEFS:
            self.deny("dunder", node, "special methods other than __init__ and __repr__ can run code at unexpected "
                      "times (e.g. when an object is freed)", f"def {node.name}")
        if node.name == "ehr":
            self.deny("ehr", node, "generated code may not rebind `ehr`", "def ehr")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                self.deny("reflection", node, "metaclasses run code while the class is built",
                          f"class {node.name}(metaclass=...)")

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        if "ehr" in node.names:
            self.deny("ehr", node, "generated code may not rebind `ehr`")

    visit_Nonlocal = visit_Global

    # -- SQL ------------------------------------------------------------------------------

    def check_sink(self, call: ast.Call, folder: Folder) -> None:
        """``ehr.sql(query, ...)`` (and aliases): the query must be a read."""
        argument = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg in ("query", "sql")), None)
        if argument is None:
            return
        alternatives = folder.fold(argument)
        if not alternatives or not any(a.has_constant_text for a in alternatives):
            if contains_obfuscation(argument):
                self.deny("sql", argument, "the SQL passed here is hidden in character codes or bytes; write the query "
                          "as plain text")
            else:
                self.notes.append(f"line {call.lineno}: the SQL passed to `{_snippet(call.func)}` is built at run time "
                                  "and could not be checked statically")
            return
        for alternative in alternatives:
            if _deferred(alternative):  # parts known only at run time: judged on the SQL that runs
                self.notes.append(f"line {call.lineno}: the SQL passed to `{_snippet(call.func)}` is partly built at "
                                  "run time; it is checked as it runs")
                continue
            self._report_sql(argument, alternative, strict=True)

    def check_string(self, node: ast.AST, alternatives: list[Folded]) -> None:
        for alternative in alternatives:
            self._report_sql(node, alternative, strict=False)

    def _report_sql(self, node: ast.AST, folded: Folded, *, strict: bool) -> None:
        problems = sqlcheck.check_sql(folded.text, strict=strict)
        hidden = " (the statement was hidden in character codes or bytes)" if folded.obfuscated else ""
        line = getattr(node, "lineno", 1)
        for problem in problems:
            self.add("sql", line, f"line {line}: the SQL statement {problem.message()}{hidden}")


def _deferred(folded: Folded) -> bool:
    """SQL with parts filled in at run time that parses only once they are there (``SELECT {cols}
    FROM t`` with ``cols`` built by earlier code): the run-time check decides. Whatever the
    visible text already shows to be unsafe (a statement, a file, text hidden in character
    codes) is refused here."""
    if not folded.unknown or folded.obfuscated:
        return False
    problems = sqlcheck.check_sql(folded.text, strict=True)
    return bool(problems) and all(p.kind == "unparsable" for p in problems)


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, (ast.Attribute, ast.Subscript)) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


_MATERIALISING = frozenset({"list", "tuple", "set", "frozenset", "sorted", "sum", "max", "min", "any", "all", "join",
                            "dict", "bytes", "bytearray", "Counter", "deque", "array", "fromiter", "enumerate"})


def _infinite(node: ast.Call) -> bool:
    """``itertools.count()``, ``cycle(...)``, ``repeat(x)`` without a count."""
    name = _call_name(node)
    return name in ("count", "cycle") and not isinstance(node.func, ast.Attribute) or \
        name in ("count", "cycle") and isinstance(node.func, ast.Attribute) and _root_name(node.func) in (
            "itertools", "it") or name == "repeat" and len(node.args) == 1 and not node.keywords


def _range_size(node: ast.Call) -> int | None:
    bounds = [b for b in (int_value(a) for a in node.args) if b is not None]
    if not bounds or len(bounds) != len(node.args):
        return None
    if len(bounds) == 1:
        start, stop, step = 0, bounds[0], 1
    else:
        start, stop, step = bounds[0], bounds[1], bounds[2] if len(bounds) > 2 else 1
    return max(0, (stop - start) // step) if step else None


def _literal_size(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return max(1, len(node.value))
    if isinstance(node, (ast.List, ast.Tuple)):
        return max(1, len(node.elts))
    if isinstance(node, ast.JoinedStr):
        return max(1, sum(len(v.value) for v in node.values
                          if isinstance(v, ast.Constant) and isinstance(v.value, str)))
    return None


def _product(values: list[int | None]) -> int:
    result = 1
    for v in values:
        result *= max(0, v or 0)
    return result


def _human(n: int) -> str:
    for size, unit in ((10**12, "10^12"), (10**9, "10^9"), (10**6, "10^6")):
        if n >= size:
            return f"{n / size:.0f} x {unit}"
    return f"{n:,}"


def _snippet(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except RecursionError:  # an expression nested too deep to print back
        text = type(node).__name__
    return _short(text, limit)


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
