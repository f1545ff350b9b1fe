import json, traceback
from services.ingest import ingest_uploads
from services.review import submit_review
from services.export import ExportFilters, export_records
from services.retrieval import search, default_params
from tests.security._support import save_runs, table_counts

def _try(label, fn):
    try:
        r = fn()
        print("OK", label, getattr(r, "to_dict", lambda: r)() if not isinstance(r, list) else len(r))
    except Exception as e:
        print("EXC", label, type(e).__mro__[:3], str(e)[:300])

def test_probe(clean_db, engine):
    import random, string
    rnd = random.Random(1)
    word = "".join(rnd.choice(string.ascii_lowercase) for _ in range(9000))
    dna = "".join(rnd.choice("acgt") for _ in range(20000))
    deep = {"k": None}
    for _ in range(900):
        deep = {"k": deep}
    cases = {
        "nul.jsonl": b'{"_id": "a", "text": "hello\\u0000world"}\n{"_id": "ok1", "text": "fine line"}',
        "sur.jsonl": b'{"_id": "b", "text": "hello \\ud800 world"}',
        "meta.jsonl": b'{"_id": "c", "text": "hi", "metadata": {"k": "\\u0000"}}',
        "nan.jsonl": b'{"_id": "n", "text": "hi", "metadata": {"k": NaN}}',
        "inf.jsonl": b'{"_id": "n2", "text": "hi", "metadata": {"k": 1e999}}',
        "deep.jsonl": (json.dumps({"_id": "deep", "text": "x", "metadata": deep}) + "\n").encode(),
        "longid.jsonl": json.dumps({"_id": word, "text": "x"}).encode(),
        "word.txt": word.encode(),
        "dna.txt": dna.encode(),
        "nul\x00name.txt": b"hello",
        "caf\udce9.txt": b"hello",
    }
    for name, data in cases.items():
        _try(repr(name)[:30], lambda: ingest_uploads([(name, data)]))
    ids = save_runs(2)
    _try("review nul comment", lambda: submit_review(ids[0], expected_version=0, action="approve", reviewer="r", comment="a\x00b"))
    _try("review nul reviewer", lambda: submit_review(ids[0], expected_version=0, action="approve", reviewer="r\x00"))
    _try("review surrogate", lambda: submit_review(ids[0], expected_version=0, action="approve", reviewer="r", comment="\ud800"))
    _try("review huge id", lambda: submit_review(2**70, expected_version=0, action="approve", reviewer="r"))
    _try("review huge version", lambda: submit_review(ids[1], expected_version=2**70, action="approve", reviewer="r"))
    _try("export nul", lambda: export_records(ExportFilters(reviewer="a\x00")))
    _try("export surrogate", lambda: export_records(ExportFilters(profile="\udce9")))
    _try("search surrogate", lambda: search("abc \udce9", default_params(mode="bm25")))
    _try("search longword", lambda: search(word, default_params(mode="bm25")))
    print(table_counts(engine))
