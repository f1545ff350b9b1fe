from pathlib import Path
from streamlit.testing.v1 import AppTest
APP = str(Path(__file__).resolve().parents[2] / "app.py")

def test_probe(clean_db, tmp_path):
    from services.ingest import ingest_paths
    (tmp_path / "a.md").write_text("# Alpha\nAlpha text about robots.")
    ingest_paths([tmp_path])
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/corpus.py").run()
    at.checkbox(key="corpus.delete_confirm").check()
    at.secrets["auth"] = {"client_id": "x"}
    at.secrets["workbench"] = {"admins": ["alice@x.org"]}
    at.user = {"is_logged_in": True, "email": "bob@x.org"}
    at.button(key="corpus.delete").click().run()
    print(at.exception, [c.value for c in at.caption], at.button(key="corpus.delete").disabled, [e.value for e in at.error])
    at.run()
    print(at.exception, [c.value for c in at.caption], at.button(key="corpus.delete").disabled, [e.value for e in at.error])
    at2 = AppTest.from_file(APP, default_timeout=120)
    at2.secrets["auth"] = {"client_id": "x"}
    at2.secrets["workbench"] = {"admins": ["alice@x.org"]}
    at2.user = {"is_logged_in": True, "email": "alice@x.org"}
    at2.run(); at2.switch_page("pages/corpus.py").run()
    print(at2.exception, [c.value for c in at2.caption], at2.button(key="corpus.delete").disabled, [e.value for e in at2.error])
