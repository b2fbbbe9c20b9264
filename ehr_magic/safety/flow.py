"""Following string values through the statements of generated code, to check its SQL.

``Flow`` walks the statements in order, keeping for each name the strings it may hold
(both branches of an ``if``, a ``for`` loop over a literal list, ``+=``), and hands every
SQL sink (``ehr.sql(...)``, ``.execute(...)``, aliases such as ``run = ehr.sql``) and
every other string expression to the guard's checker. Function bodies are walked with
their parameters unknown.
"""

from __future__ import annotations

import ast
from typing import Any

from ehr_magic.safety.strings import Env, Folder

SQL_SINKS = frozenset({"sql", "execute", "executemany", "query"})


class Flow:
    """Walks statements in order, tracking string values of names, to check SQL sinks."""

    def __init__(self, checker: Any, env: Env | None = None) -> None:
        self.checker = checker
        self.env: Env = env if env is not None else {}

    def block(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        self.expressions(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.bind(target, node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if isinstance(node.op, ast.Add):
                value = ast.BinOp(left=ast.Name(node.target.id, ast.Load()), op=ast.Add(), right=node.value)
                self.bind(node.target, value)
            else:
                self.env.pop(node.target.id, None)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            before = self._copy()
            if isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)):
                folder = Folder(self.env)
                options = [o for e in node.iter.elts for o in (folder.fold(e) or [])]
                if options:
                    self.env[node.target.id] = options[:16]
                else:
                    self.env.pop(node.target.id, None)
            else:
                for name in _names(node.target):
                    self.env.pop(name, None)
            self.block(node.body)
            self._merge(before)
            self.block(node.orelse)
        elif isinstance(node, ast.While):
            before = self._copy()
            self.block(node.body)
            self._merge(before)
            self.block(node.orelse)
        elif isinstance(node, ast.If):
            before = self._copy()
            self.block(node.body)
            after_body = self._copy()
            self.env = before
            self.block(node.orelse)
            self._merge(after_body)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self.block(node.body)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            before = self._copy()
            self.block(node.body)
            for handler in node.handlers:
                self.block(handler.body)
            self._merge(before)
            self.block(node.orelse)
            self.block(node.finalbody)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = Flow(self.checker, {k: v for k, v in self.env.items()
                                         if k not in {a.arg for a in (*node.args.posonlyargs, *node.args.args,
                                                                       *node.args.kwonlyargs)}})
            inner.block(node.body)
            self.env.pop(node.name, None)
        elif isinstance(node, ast.ClassDef):
            Flow(self.checker, dict(self.env)).block(node.body)
        elif isinstance(node, ast.Match):
            before = self._copy()
            for case in node.cases:
                self.block(case.body)
            self._merge(before)

    def bind(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            if _is_ehr_sql(value):
                self.checker.sql_aliases.add(target.id)
            folded = Folder(self.env).fold(value)
            if folded:
                self.env[target.id] = folded
            else:
                self.env.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                self.bind(t, v)
        else:
            for name in _names(target):
                self.env.pop(name, None)

    def expressions(self, node: ast.stmt) -> None:
        """Check the SQL of this statement's own expressions (not of nested blocks)."""
        folder = Folder(self.env)
        for expression in _header_expressions(node):
            self._visit(expression, folder)

    def _visit(self, node: ast.AST, folder: Folder) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, ast.Call) and self._is_sink(current):
                self.checker.check_sink(current, folder)
                stack.extend(current.args[1:])
                stack.extend(k.value for k in current.keywords)
                stack.append(current.func)
                if current.args:
                    self._strings_inside(current.args[0], folder)
                continue
            if isinstance(current, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call)):
                folded = folder.fold(current)
                if folded is not None and any(f.has_constant_text for f in folded):
                    self.checker.check_string(current, folded)
                    if isinstance(current, (ast.Constant, ast.JoinedStr)):
                        continue
            stack.extend(ast.iter_child_nodes(current))

    def _strings_inside(self, node: ast.AST, folder: Folder) -> None:
        """Sub-expressions of a sink argument that are calls or lambdas may hold more SQL."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and sub is not node and self._is_sink(sub):
                self.checker.check_sink(sub, folder)

    def _is_sink(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in SQL_SINKS:
            return True
        return isinstance(func, ast.Name) and func.id in self.checker.sql_aliases

    def _copy(self) -> Env:
        return {k: list(v) for k, v in self.env.items()}

    def _merge(self, other: Env) -> None:
        merged: Env = {}
        for name in set(self.env) & set(other):
            options = self.env[name] + [o for o in other[name] if o not in self.env[name]]
            merged[name] = options[:16]
        self.env = merged


def _header_expressions(node: ast.stmt) -> list[ast.AST]:
    """Expressions that belong to a statement itself, not to the blocks nested in it."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*node.decorator_list, *node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    if isinstance(node, (ast.While, ast.If)):
        return [node.test]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    if isinstance(node, (ast.Try, ast.TryStar)):
        return [h.type for h in node.handlers if h.type is not None]
    if isinstance(node, ast.Match):
        return [node.subject]
    return [node]


def _is_ehr_sql(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in SQL_SINKS


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
