"""SQL is never built from strings with values in them: every value is bound.

Statically: walk services/, db/ (migrations excluded: Alembic DDL, no user values) and the
test conftest, find every `text(...)`, `literal_column(...)`, `.execute(...)` and
`.exec_driver_sql(...)`, follow the SQL argument back through names, dict lookups and loop
variables to the expressions that make it, and fail on any f-string, %-format, .format() or
+ concatenation of something that is not a constant -- unless the case is on the reviewed
allow-list below, and even then only while it still interpolates module constants alone.
At run time: searches, reviews and exports full of SQL leave every table as it was.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.corpus.ingest import ingest_uploads
from services.retrieval.search import default_params, search
from services.review.export import ExportFilters, export_records
from services.review.queue import review_history, submit_review
from tests.security._support import SQL_METACHARACTERS, save_runs, table_counts

ROOT = Path(__file__).resolve().parents[2]
SCANNED = sorted({*ROOT.glob("services/**/*.py"), *ROOT.glob("db/**/*.py")} - {*ROOT.glob("db/migrations/**/*.py")})
SCANNED.append(ROOT / "tests" / "conftest.py")

# Reviewed string-built SQL, keyed by (file, the constant or function that builds it).
# constants_only=True: the case is allowed only while every interpolated value is a module-level
# constant (a literal, or built only from literals), so a user value slipped in later still fails.
ALLOWED = {
    # The three retrieval statements are assembled once, at import, from constant CTE fragments
    # so that the hybrid SQL is literally the BM25 and dense SQL joined; all values are bound.
    ("services/retrieval/search_sql.py", "HYBRID_SQL"): True,
    ("services/retrieval/search_sql.py", "BM25_SQL"): True,
    ("services/retrieval/search_sql.py", "DENSE_SQL"): True,
    ("services/retrieval/search_sql.py", "BM25_SLICE_SQL"): True,
    ("services/retrieval/search_sql.py", "DENSE_LEG_SQL"): True,
    ("services/retrieval/search_sql.py", "GIVEN_HYBRID_SQL"): True,
    ("services/retrieval/search_sql.py", "GIVEN_BM25_SQL"): True,
    # Scoring given chunks or texts reuses those fragments, assembled once at import (services/intake).
    # They interpolate only the search module's constants, which the scanner cannot follow across
    # an import, hence reviewed rather than checked; every value is bound.
    ("services/intake/chunk_scores.py", "<module>"): False,
    ("services/intake/context_scores.py", "<module>"): False,
    # The Document trends reference (read from the runs, to check the rollup against) reuses the
    # page's constant fragments from services/review/documents.py; every value is bound.
    ("services/review/document_trends_check.py", "<module>"): False,
    # An OTLP export's one statement opens with the API key check it shares with the refusal path
    # (_ACTIVE_KEY, a literal); every value is bound.
    ("services/intake/traces.py", "<module>"): True,
    # pg_advisory_xact_lock(<constant key>): an integer literal, not input.
    ("db/migrate.py", "upgrade_to_head"): True,
    # Test-only TRUNCATE of table names read from pg_tables (identifiers cannot be bound).
    ("tests/conftest.py", "clean_db"): False,
}
# Reviewed functions that assemble SQL text from their arguments and module constants alone:
# a call to one counts as constant while every argument does, so a value passed in still fails.
SQL_BUILDERS = {("services/retrieval/search_sql.py", name) for name in ("_bm25_top", "_search_sql")}
SQL_ARGUMENT_CALLS = {"text", "literal_column", "exec_driver_sql"}  # their first argument is SQL text
STATEMENT_CALLS = {"execute", "executemany"}  # their first argument is a statement: flagged only if built from strings
CONSTANT_METHODS = {"strip", "lstrip", "rstrip", "upper", "lower"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    symbol: str  # the constant the SQL came from, else the enclosing function
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.symbol}): {self.problem}"


class _Scope:
    """Names assigned in one module or function body (all assignments, loop targets included)."""

    def __init__(self, body: list[ast.stmt], parent: _Scope | None) -> None:
        self.parent = parent
        self.bindings: dict[str, list[ast.expr]] = {}
        for node in _walk_without_nested_defs(body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, (ast.For, ast.comprehension)):
                self._bind(node.target, ast.Starred(value=node.iter))  # "one element of" the iterable

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bindings.setdefault(target.id, []).append(value)

    def lookup(self, name: str) -> tuple[list[ast.expr], bool] | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.bindings:
                return scope.bindings[name], scope.parent is None
            scope = scope.parent
        return None


def _walk_without_nested_defs(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of `body`; a nested def or class is yielded but not entered (it has its own scope)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _call_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


class _Checker:
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.tree = ast.parse(source, filename=path)
        self.module = _Scope(self.tree.body, None)
        self.findings: list[Finding] = []
        self.allowed_seen: set[tuple[str, str]] = set()
        self.builders_seen: set[tuple[str, str]] = set()
        self.inspected = 0  # SQL-taking calls looked at
        self.sql_text_imported = any(
            isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("sqlalchemy")
            and any(a.name == "text" for a in n.names) for n in ast.walk(self.tree))

    def run(self) -> None:
        self._visit(self.tree.body, self.module, "<module>")

    def _visit(self, body: list[ast.stmt], scope: _Scope, function: str) -> None:
        for node in _walk_without_nested_defs(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._visit(node.body, _Scope(node.body, scope), node.name)
            elif isinstance(node, ast.ClassDef):
                self._visit(node.body, scope, function)
            elif isinstance(node, ast.Call) and node.args:
                self._check_call(node, scope, function)

    def _check_call(self, call: ast.Call, scope: _Scope, function: str) -> None:
        name = _call_name(call)
        if name == "text" and isinstance(call.func, ast.Name) and not self.sql_text_imported:
            return  # some other `text` (a page's st.text is an Attribute and never reaches here)
        if name == "text" and isinstance(call.func, ast.Attribute) and not (
                isinstance(call.func.value, ast.Name) and call.func.value.id in ("sa", "sqlalchemy")):
            return
        if name not in SQL_ARGUMENT_CALLS | STATEMENT_CALLS:
            return
        self.inspected += 1
        for symbol, leaf in self._leaves(call.args[0], scope, function, depth=0):
            problem = self._problem(leaf, scope, strict=name in SQL_ARGUMENT_CALLS)
            if problem is None:
                continue
            key = (self.path, symbol)
            if key in ALLOWED:
                self.allowed_seen.add(key)
                if not ALLOWED[key] or self._constants_only(leaf, depth=0):
                    continue
                problem += " (allow-listed only while it interpolates module constants alone)"
            self.findings.append(Finding(self.path, getattr(leaf, "lineno", call.lineno), symbol, problem))

    def _leaves(self, expr: ast.expr, scope: _Scope, symbol: str, depth: int) -> Iterator[tuple[str, ast.expr]]:
        """The expressions the SQL argument can come from, each with the name it was reached by."""
        if depth > 20:
            yield symbol, expr
        elif isinstance(expr, ast.Name) and (found := scope.lookup(expr.id)) is not None:
            values, module_level = found
            for value in values:
                yield from self._leaves(value, scope if not module_level else self.module, expr.id, depth + 1)
        elif isinstance(expr, ast.Starred):  # an element of an iterable (a loop variable)
            inner = list(self._leaves(expr.value, scope, symbol, depth + 1))
            for sym, leaf in inner:
                if isinstance(leaf, (ast.Tuple, ast.List, ast.Set)):
                    for element in leaf.elts:
                        yield from self._leaves(element, scope, sym, depth + 1)
                else:
                    yield sym, leaf
        elif isinstance(expr, ast.Subscript):
            for sym, leaf in list(self._leaves(expr.value, scope, symbol, depth + 1)):
                elements = leaf.values if isinstance(leaf, ast.Dict) else leaf.elts if isinstance(leaf, (ast.Tuple, ast.List)) else None
                if elements is None:
                    yield sym, expr
                for element in elements or ():
                    yield from self._leaves(element, scope, sym, depth + 1)
        elif isinstance(expr, ast.Call) and _call_name(expr) == "text" and expr.args:
            return  # text(...) inside execute(...) is checked as a call of its own
        else:
            yield symbol, expr

    def _problem(self, leaf: ast.expr, scope: _Scope, *, strict: bool) -> str | None:
        if isinstance(leaf, ast.JoinedStr):
            return "f-string" if any(isinstance(v, ast.FormattedValue) for v in leaf.values) else None
        if isinstance(leaf, ast.BinOp) and isinstance(leaf.op, ast.Mod) and _is_str(leaf.left):
            return "%-formatted SQL"
        if isinstance(leaf, ast.Call) and isinstance(leaf.func, ast.Attribute) and leaf.func.attr == "format":
            return ".format() SQL"
        if isinstance(leaf, ast.BinOp) and isinstance(leaf.op, ast.Add):
            return None if self._constants_only(leaf, depth=0) else "+ concatenation with a non-constant"
        if isinstance(leaf, ast.Constant):
            return None
        if strict:
            return f"SQL text that is not a constant ({ast.unparse(leaf)[:60]})"
        return None  # execute() of a select()/insert()/text() object or a statement passed in

    def _constants_only(self, expr: ast.expr, depth: int) -> bool:
        """Built only from literals and module-level names that are themselves built so."""
        if depth > 20:
            return False
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (str, int, float))
        if isinstance(expr, ast.JoinedStr):
            return all(self._constants_only(v, depth + 1) for v in expr.values)
        if isinstance(expr, ast.FormattedValue):
            return self._constants_only(expr.value, depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self._constants_only(expr.left, depth + 1) and self._constants_only(expr.right, depth + 1)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and (self.path, expr.func.id) in SQL_BUILDERS:
            self.builders_seen.add((self.path, expr.func.id))
            return not expr.keywords and all(self._constants_only(arg, depth + 1) for arg in expr.args)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in CONSTANT_METHODS:
            return not expr.args and self._constants_only(expr.func.value, depth + 1)
        if isinstance(expr, ast.Name):
            values = self.module.bindings.get(expr.id)
            return bool(values) and len(values) == 1 and self._constants_only(values[0], depth + 1)
        return False


def _is_str(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str) or isinstance(expr, ast.JoinedStr)


def scan(paths: list[Path]) -> tuple[list[Finding], set[tuple[str, str]], int]:
    """Findings, the allow-list and builder entries used, and how many SQL calls were inspected."""
    findings, seen, inspected = [], set(), 0
    for path in paths:
        checker = _Checker(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        checker.run()
        findings += checker.findings
        seen |= checker.allowed_seen | checker.builders_seen
        inspected += checker.inspected
    return findings, seen, inspected


def test_no_sql_is_built_from_strings_with_values():
    findings, seen, inspected = scan(SCANNED)
    assert inspected >= 40, f"only {inspected} SQL calls found: is the scanner still looking in the right places?"
    assert not findings, "string-built SQL (bind the values instead):\n" + "\n".join(map(str, findings))
    stale = (set(ALLOWED) | SQL_BUILDERS) - seen
    assert not stale, f"allow-list or builder entries that match nothing any more (remove them): {sorted(stale)}"


def test_pages_never_touch_sql():
    """pages -> services -> db: a page with SQL in it would bypass every check above."""
    offenders = []
    for path in sorted((ROOT / "app_pages").glob("*.py")) + [ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}:{node.lineno} imports {m}" for m in modules
                          if m.split(".")[0] in ("sqlalchemy", "psycopg")]
            if isinstance(node, ast.Call) and _call_name(node) in {"execute", "exec_driver_sql", "executemany"}:
                offenders.append(f"{path.name}:{node.lineno} calls {_call_name(node)}()")
    assert not offenders, offenders


@pytest.mark.parametrize("source, flagged", [
    ('from sqlalchemy import text\ndef f(s, q):\n    s.execute(text(f"SELECT * FROM runs WHERE query = \'{q}\'"))\n', True),
    ('from sqlalchemy import text\ndef f(s, q):\n    s.execute(text("SELECT * FROM runs WHERE query = \'%s\'" % q))\n', True),
    ('from sqlalchemy import text\ndef f(s, q):\n    s.execute(text("SELECT {}".format(q)))\n', True),
    ('from sqlalchemy import text\ndef f(s, q):\n    sql = "SELECT " + q\n    s.execute(text(sql))\n', True),
    ('from sqlalchemy import text\n_SQL = {"a": "SELECT 1", "b": f"SELECT {x}"}\ndef f(s, m):\n    s.execute(text(_SQL[m]))\n', True),
    ('def f(conn, name):\n    conn.exec_driver_sql(f"DROP TABLE {name}")\n', True),
    ('def f(conn, sql):\n    conn.exec_driver_sql(sql)\n', True),
    ('from sqlalchemy import text\n_SQL = "SELECT :q"\ndef f(s, q):\n    s.execute(text(_SQL), {"q": q})\n', False),
    ('from sqlalchemy import text\n_A = "SELECT 1"\n_B = _A + " UNION " + _A\ndef f(s):\n    s.execute(text(_B))\n', False),
    ('from sqlalchemy import text\nSTMTS = ("SELECT 1", "SELECT 2")\ndef f(s):\n    for x in STMTS:\n        s.execute(text(x))\n', False),
    ('def f(s, stmt):\n    s.execute(stmt)\n', False),
    # A reviewed builder's text is constant only while its arguments are (BM25_SQL is allow-listed
    # while it interpolates constants alone).
    ('from sqlalchemy import text\nBM25_SQL = f"SELECT {_bm25_top(1)}"\ndef f(s):\n    s.execute(text(BM25_SQL))\n', False),
    ('from sqlalchemy import text\nQ = input()\nBM25_SQL = f"SELECT {_bm25_top(Q)}"\ndef f(s):\n    s.execute(text(BM25_SQL))\n', True),
    ('from sqlalchemy import text\nBM25_SQL = f"SELECT {_not_reviewed(1)}"\ndef f(s):\n    s.execute(text(BM25_SQL))\n', True),
])
def test_the_checker_itself_flags_string_built_sql(source, flagged):
    """The scanner must see what it is for: a checker that flags nothing proves nothing."""
    checker = _Checker("services/retrieval/search_sql.py", source)
    checker.run()
    assert bool(checker.findings) == flagged, [str(f) for f in checker.findings]


# --- run time: SQL metacharacters are data, never code -----------------------------------------------------


def test_searches_reviews_and_exports_full_of_sql_change_nothing_they_should_not(clean_db, engine):
    assert ingest_uploads([("srvo.md", b"# SRVO-062\nReplace the battery pack, then remaster the axis.")]).ingested == 1
    run_ids = save_runs(len(SQL_METACHARACTERS))
    before = table_counts(engine)
    for hostile in SQL_METACHARACTERS:
        for mode in ("bm25", "hybrid"):
            result = search(f"battery {hostile}", default_params(mode=mode))
            assert result.hits and result.hits[0].external_id == "srvo.md"
        search(f"battery {hostile}", default_params(mode="bm25", collection=hostile))  # an unknown collection: no hits
    assert table_counts(engine) == before, "searching wrote or dropped rows"

    for run_id, hostile in zip(run_ids, SQL_METACHARACTERS):
        submit_review(run_id, expected_version=0, action="flag", reviewer=hostile, comment=hostile, flag_reason="other")
        assert export_records(ExportFilters(reviewer=hostile, profile=hostile)) == []
    after = table_counts(engine)
    assert after["review_history"] == before["review_history"] + len(SQL_METACHARACTERS)
    assert {k: v for k, v in after.items() if k != "review_history"} == {k: v for k, v in before.items() if k != "review_history"}
    for run_id, hostile in zip(run_ids, SQL_METACHARACTERS):
        (entry,) = review_history(run_id)
        assert (entry.reviewer, entry.comment) == (hostile, hostile)  # stored as typed, byte for byte
        assert [r["run_id"] for r in export_records(ExportFilters(reviewer=hostile))] == [run_id]
