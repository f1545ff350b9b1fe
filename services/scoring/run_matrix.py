"""The stored runs as numeric arrays for re-scoring: what the blend and triage need, nothing else.

A million runs must load in well under a second and stay in memory between slider moves, so
the load reads only numbers: no question or answer text (level_changes' few rows fetch theirs
with question_texts), statuses, levels and presets as small codes. Postgres writes the rows
with COPY in its binary format, every field fixed-width and never NULL (NaN stands in), so
numpy reads the whole stream as one structured array without a Python object per value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.domain import STATUSES
from services.scoring.blend import REFLECTION_MIN_SCORE
from services.scoring.weights import COMPONENTS, LEVELS
from services.store import read_transaction

VERDICT_LABELS = {"approved": 1, "flagged": 0, "corrected": 0}  # everything else: -1, unreviewed
# Presets coded in the scan; any other is read by run id afterwards (_names), so this list
# only saves that second query. Named here, not imported: scoring sits below answering.
_KNOWN_PRESETS = ("balanced", "minimal", "research", "as-written", "full", "external")


@dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value; identity is enough
class RunMatrix:
    """Stored runs as parallel arrays, one row per run (COMPONENTS order for `components`)."""

    run_ids: np.ndarray  # int64
    components: np.ndarray  # (n, 7) float64
    reflection: np.ndarray  # float64, NaN when reflection did not run or failed
    grade_norm: np.ndarray  # (grade - 1) / 4, NaN when not graded
    heuristic: np.ndarray  # NaN unless the heuristic stood in for reflection and grade
    has_answer: np.ndarray  # bool
    crag_correct: np.ndarray  # bool: CRAG verdict CORRECT
    reflection_approved: np.ndarray  # bool: reflection >= the run's reflection_min_score (REFLECTION_MIN_SCORE)
    statuses: np.ndarray  # object (one shared str per status)
    labels: np.ndarray  # int8: 1 approved, 0 flagged/corrected, -1 unreviewed
    current_levels: np.ndarray  # object: the level stored with the run
    stored_confidence: np.ndarray  # float64: the final confidence stored with the run
    presets: np.ndarray  # object

    def __len__(self) -> int:
        return len(self.run_ids)

    @property
    def reviewed(self) -> np.ndarray:
        """Mask of runs with a reviewer verdict."""
        return self.labels >= 0

    @property
    def nbytes(self) -> int:
        """Memory the arrays hold (object arrays: their pointers; the strings are shared)."""
        return sum(getattr(self, name).nbytes for name in self.__dataclass_fields__)


# Codes: position in the given list, 0 for a value outside it (then read by name: _unlisted).
_CODE = "coalesce(array_position(CAST(%({list})s AS text[]), {column}), 0)::int2"
_NUMBER = "coalesce({expr}, 'NaN'::float8)"
_MATRIX_COPY = """
COPY (
  SELECT id, {status}, {level}, {preset}, final_confidence, {components},
         {reflection}, {grade}, {heuristic},
         final_answer <> '' AS has_answer,
         crag_verdict IS NOT DISTINCT FROM 'CORRECT' AS crag_correct,
         coalesce(reflection_score >= coalesce(reflection_min_score, %(reflection_min)s),
                  false) AS reflection_approved
  FROM runs
  WHERE id >= coalesce((SELECT id FROM runs WHERE CAST(%(limit)s AS bigint) IS NOT NULL
                        ORDER BY id DESC OFFSET CAST(%(limit)s AS bigint) - 1 LIMIT 1), 0)
) TO STDOUT (FORMAT binary)
""".format(
    status=_CODE.format(list="statuses", column="status"), level=_CODE.format(list="levels", column="final_level"),
    preset=_CODE.format(list="presets", column="preset"),
    components=", ".join(_NUMBER.format(expr=f"components[{i + 1}]") for i in range(len(COMPONENTS))),
    reflection=_NUMBER.format(expr="CAST(signals->>'reflection' AS float8)"),
    grade=_NUMBER.format(expr="CAST(signals->>'grade' AS float8)"),
    heuristic=_NUMBER.format(expr="CAST(signals->>'heuristic' AS float8)"),
)
_FLOATS = ("confidence", *(f"c{i}" for i in range(len(COMPONENTS))), "reflection", "grade", "heuristic")
_FIELDS = [("id", ">i8"), ("status", ">i2"), ("level", ">i2"), ("preset", ">i2"), *((name, ">f8") for name in _FLOATS),
           ("has_answer", "u1"), ("crag_correct", "u1"), ("reflection_approved", "u1")]
# Each binary COPY tuple: a 16-bit field count, then per field a 32-bit length and the value.
_ROW = np.dtype([("count", ">i2"), *((part, kind) for name, dtype in _FIELDS
                                     for part, kind in ((f"len_{name}", ">i4"), (name, dtype)))])
_HEADER, _TRAILER = 19, 2  # signature, flags and extension length; the -1 field count that ends it


def load_run_matrix(*, session: Session | None = None, limit: int | None = None) -> RunMatrix:
    """All stored runs (or the latest `limit`), oldest first, in one pass over the table (on the
    read replica when there is one)."""
    if session is None:
        with read_transaction() as own:
            return load_run_matrix(session=own, limit=limit)
    params = {"limit": limit, "reflection_min": REFLECTION_MIN_SCORE, "statuses": list(STATUSES),
              "levels": list(LEVELS), "presets": list(_KNOWN_PRESETS)}
    driver = session.connection().connection.driver_connection
    assert driver is not None  # a checked-out connection always has its DBAPI connection
    stream = bytearray()
    with driver.cursor() as cursor, cursor.copy(_MATRIX_COPY, params) as copy:
        for block in copy:
            stream += block
    rows = np.frombuffer(stream, dtype=_ROW, offset=_HEADER, count=(len(stream) - _HEADER - _TRAILER) // _ROW.itemsize) \
        if len(stream) > _HEADER + _TRAILER else np.zeros(0, dtype=_ROW)
    # A plain scan, no ORDER BY (a sort or an index walk of every row); ordered here.
    matrix = _matrix(rows[np.argsort(rows["id"], kind="stable")], session)
    for name in matrix.__dataclass_fields__:  # kept and shared between sessions: nobody may write into it
        getattr(matrix, name).flags.writeable = False
    return matrix


def _matrix(rows: np.ndarray, session: Session) -> RunMatrix:
    run_ids = rows["id"].astype(np.int64)
    statuses = _names(rows["status"], STATUSES, run_ids, "status", session)
    labels = np.full(len(rows), -1, dtype=np.int8)
    for status, label in VERDICT_LABELS.items():
        labels[rows["status"] == STATUSES.index(status) + 1] = label

    def floats(name: str) -> np.ndarray:
        return rows[name].astype(np.float64)

    return RunMatrix(
        run_ids=run_ids, components=np.column_stack([floats(f"c{i}") for i in range(len(COMPONENTS))])
        if len(rows) else np.zeros((0, len(COMPONENTS))),
        reflection=floats("reflection"), grade_norm=floats("grade"), heuristic=floats("heuristic"),
        has_answer=rows["has_answer"].astype(bool), crag_correct=rows["crag_correct"].astype(bool),
        reflection_approved=rows["reflection_approved"].astype(bool), statuses=statuses, labels=labels,
        current_levels=_names(rows["level"], LEVELS, run_ids, "final_level", session),
        stored_confidence=floats("confidence"), presets=_names(rows["preset"], _KNOWN_PRESETS, run_ids, "preset", session),
    )


def _names(codes: np.ndarray, names: Sequence[str], run_ids: np.ndarray, column: str, session: Session) -> np.ndarray:
    """Codes back to (shared) strings; the rare value outside `names` read by run id."""
    table = np.array(["", *names], dtype=object)
    out = table[codes.astype(np.intp)]
    unlisted = np.flatnonzero(codes == 0)
    if len(unlisted):
        found = _unlisted(column, run_ids[unlisted].tolist(), session)
        out[unlisted] = [found.get(int(run_id), "") for run_id in run_ids[unlisted]]
    return out


_UNLISTED = {"status": text("SELECT id, status FROM runs WHERE id = ANY(:ids)"),
             "final_level": text("SELECT id, final_level FROM runs WHERE id = ANY(:ids)"),
             "preset": text("SELECT id, preset FROM runs WHERE id = ANY(:ids)")}


def _unlisted(column: str, run_ids: list[int], session: Session) -> dict[int, str]:
    return dict(session.execute(_UNLISTED[column], {"ids": run_ids}).tuples().all())


# The files of runs' month tables (0016: the partitioned parent has none of its own): TRUNCATE
# gives every one a new file, as does dropping or adding a month.
_EPOCH = text("""
SELECT coalesce((SELECT string_agg(CAST(pg_relation_filenode(relid) AS text), ',' ORDER BY relid)
                 FROM pg_partition_tree('runs') WHERE isleaf),
                CAST(pg_relation_filenode('runs') AS text), '0')""")


def run_store_epoch(*, session: Session | None = None) -> str:
    """Which store and which life of its runs table: it changes when the table is emptied with
    TRUNCATE (new files) or a month is dropped or added, or the store is another, not when runs
    are added. A kept matrix keyed
    by it is never one of another store's, and is reloaded on its own schedule otherwise."""
    if session is None:
        with read_transaction() as own:
            return run_store_epoch(session=own)
    return f"{session.get_bind().engine.url}|{session.scalar(_EPOCH)}"


_QUESTIONS = text("SELECT id, query FROM runs WHERE id = ANY(:ids)")


def question_texts(run_ids: Sequence[int], *, session: Session | None = None) -> dict[int, str]:
    """The questions of a few runs (the matrix holds none), by run id."""
    if session is None:
        with read_transaction() as own:
            return question_texts(run_ids, session=own)
    ids = [int(i) for i in run_ids]
    return dict(session.execute(_QUESTIONS, {"ids": ids}).tuples().all()) if ids else {}
