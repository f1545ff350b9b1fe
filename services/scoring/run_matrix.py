"""The stored runs as numeric arrays for re-scoring: what the blend and triage need, nothing else.

A million runs must load in well under a second and stay in memory between slider moves, so
the load reads only numbers: no question or answer text (level_changes' few rows fetch theirs
with question_texts), statuses, levels and presets as small codes. They are read from
run_matrix_rows, a narrow table of exactly these numbers that triggers on runs keep (migration
0017), not from runs (a million runs' month tables hold 1.4 GB and JSON to parse per row).
Each run's numbers are one fixed-width binary record there (NaN for a missing number), written
by the triggers; the server concatenates records into a few large values, and numpy reads them as
one structured array without a Python object, or a server output call, per value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.scoring.blend import REFLECTION_MIN_SCORE
from services.scoring.weights import COMPONENTS
from services.store import read_transaction

VERDICT_LABELS = {"approved": 1, "flagged": 0, "corrected": 0}  # everything else: -1, unreviewed


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


# The numbers come from run_matrix_rows (migration 0017): per run one fixed-width binary record,
# written by triggers on runs in PostgreSQL's send format (big-endian), in the layout
# run_matrix_record_layout() names. The server concatenates the records, a few megabytes per value
# (one output value per run cost more than the scan: 17 numbers a run through a binary COPY took
# 3 s of a million runs' 4), and numpy reads them as one array. Statuses, levels and presets are
# codes, positions in run_matrix_names() (0: a name outside it, read by run id).
_CODES = {"i8": ">i8", "i2": ">i2", "f8": ">f8", "b1": "u1"}
_LAYOUT = ("id:i8,status:i2,level:i2,preset:i2,confidence:f8,"
           + ",".join(f"c{i}:f8" for i in range(len(COMPONENTS)))
           + ",reflection:f8,grade:f8,heuristic:f8,has_answer:b1,crag_correct:b1,"
           "reflection_score:f8,reflection_min_score:f8")
_RECORD = np.dtype([(name, _CODES[kind]) for name, kind in (field.split(":") for field in _LAYOUT.split(","))])
_STORE_SQL = text("SELECT run_matrix_names(), run_matrix_record_layout()")
# One value per 65,536 ids (7.9 MB, far below a value's 1 GB limit however many runs there are),
# each range read through the key: the table is written in id order (0017's refresh), so the
# records mostly arrive sorted (numpy sorts them when not). One string_agg of the whole table was
# planned parallel, or as a sort for GROUP BY: 1.1-1.6 s against 0.7 s at load 9 (2026-11-27).
_MATRIX_SQL = """
SELECT (SELECT string_agg(numbers, ''::bytea) FROM run_matrix_rows WHERE id >= g AND id < g + 65536)
FROM generate_series((SELECT min(id) FROM run_matrix_rows WHERE id >= %(first)s),
                     (SELECT max(id) FROM run_matrix_rows), 65536) AS g
ORDER BY g
"""
_FIRST_OF_LATEST = text("SELECT id FROM run_matrix_rows ORDER BY id DESC OFFSET CAST(:limit AS bigint) - 1 LIMIT 1")


class RunMatrixLayoutError(RuntimeError):
    """The store's run_matrix_rows records are not laid out as this code reads them."""


def load_run_matrix(*, session: Session | None = None, limit: int | None = None) -> RunMatrix:
    """All stored runs (or the latest `limit`), oldest first, in one pass over the table (on the
    read replica when there is one)."""
    if session is None:
        with read_transaction() as own:
            return load_run_matrix(session=own, limit=limit)
    names, layout = session.execute(_STORE_SQL).one()
    if layout != _LAYOUT:
        raise RunMatrixLayoutError(f"run_matrix_rows holds records laid out as {layout!r}, this code reads "
                                   f"{_LAYOUT!r}: migrate the store and the code to the same revision")
    first = 0 if limit is None else session.scalar(_FIRST_OF_LATEST, {"limit": limit}) or 0
    driver = session.connection().connection.driver_connection
    assert driver is not None  # a checked-out connection always has its DBAPI connection
    with driver.cursor() as cursor:  # binary: the values arrive as they are, not hex-encoded
        cursor.execute(_MATRIX_SQL, {"first": first}, binary=True)
        parts = [np.frombuffer(row[0], dtype=_RECORD) for row in cursor.fetchall() if row[0] is not None]
    rows = np.concatenate(parts) if parts else np.zeros(0, dtype=_RECORD)
    if np.any(rows["id"][1:] < rows["id"][:-1]):  # oldest first: sorted here unless they came in order
        rows = rows[np.argsort(rows["id"], kind="stable")]
    matrix = _matrix(rows, tuple(names), session)
    for name in matrix.__dataclass_fields__:  # kept and shared between sessions: nobody may write into it
        getattr(matrix, name).flags.writeable = False
    return matrix


def _matrix(rows: np.ndarray, names: tuple[str, ...], session: Session) -> RunMatrix:
    run_ids = rows["id"].astype(np.int64)
    statuses = _names(rows["status"], names, run_ids, "status", session)
    labels = np.full(len(rows), -1, dtype=np.int8)
    unlisted = np.flatnonzero(rows["status"] == 0)  # read by name (_names); labelled by name too
    for status, label in VERDICT_LABELS.items():
        if status in names:
            labels[rows["status"] == names.index(status) + 1] = label
        labels[unlisted[statuses[unlisted] == status]] = label

    def floats(name: str) -> np.ndarray:
        return rows[name].astype(np.float64)

    components = np.empty((len(rows), len(COMPONENTS)))
    for i in range(len(COMPONENTS)):  # converted from big-endian straight into place
        components[:, i] = rows[f"c{i}"]
    return RunMatrix(
        run_ids=run_ids, components=components,
        reflection=floats("reflection"), grade_norm=floats("grade"), heuristic=floats("heuristic"),
        has_answer=rows["has_answer"].astype(bool), crag_correct=rows["crag_correct"].astype(bool),
        reflection_approved=_reflection_approved(floats("reflection_score"), floats("reflection_min_score")),
        statuses=statuses, labels=labels,
        current_levels=_names(rows["level"], names, run_ids, "final_level", session),
        stored_confidence=floats("confidence"), presets=_names(rows["preset"], names, run_ids, "preset", session),
    )


def _reflection_approved(score: np.ndarray, minimum: np.ndarray) -> np.ndarray:
    """score >= the run's minimum (REFLECTION_MIN_SCORE where it names none: NaN); no score: False."""
    return score >= np.where(np.isnan(minimum), REFLECTION_MIN_SCORE, minimum)


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
# gives every one a new file, as does dropping or adding a month. And the file of the table the
# matrix is read from (0017), emptied with runs by a trigger, or on its own by hand.
_EPOCH = text("""
SELECT coalesce((SELECT string_agg(CAST(pg_relation_filenode(relid) AS text), ',' ORDER BY relid)
                 FROM pg_partition_tree('runs') WHERE isleaf),
                CAST(pg_relation_filenode('runs') AS text), '0')
       || '|' || coalesce(CAST(pg_relation_filenode(to_regclass('run_matrix_rows')) AS text), '-')""")


def run_store_epoch(*, session: Session | None = None) -> str:
    """Which store and which life of its runs table: it changes when the table is emptied with
    TRUNCATE (new files) or a month is dropped or added, or the store is another, not when runs
    are added. A kept matrix keyed by it is never one of another store's, and is reloaded on its
    own schedule otherwise."""
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
