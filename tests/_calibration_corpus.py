"""A small BEIR corpus that self-calibration can fit on: enough chunks for 100+ pseudo-questions,
some of which find their document and some of which cannot.

Self-calibration measures before/after on the odd half and fits on the even half, and a fit
needs 50 pseudo-questions with both outcomes, so the corpus must give well over 100 usable
questions in every retrieval mode, some found and some missed:
* `distinct` documents, each a few sentences from its own mix of words: a question cut from
  one of them points back at it, so it is mostly found;
* `lookalike` documents, one template sentence differing only in a made-up code word: the code
  is the rarest word, so the question is the template without it, identical for all of them,
  and only ten of the lookalikes can come back in the top ten, so most are missed.
Each document is one chunk (well under the 200-token chunk size)."""

from __future__ import annotations

import json
import random
from pathlib import Path

_SUBJECTS = ("pump", "valve", "conveyor", "boiler", "compressor", "turbine", "furnace", "crane", "forklift",
             "generator", "chiller", "mixer", "press", "lathe", "kiln", "dryer", "filter", "heater", "robot", "scanner")
_PLACES = ("warehouse", "laboratory", "kitchen", "workshop", "greenhouse", "hangar", "basement", "harbor", "mine",
           "bakery", "brewery", "quarry", "farm", "depot", "clinic", "studio", "foundry", "mill", "garage", "vineyard")
_ACTIONS = ("inspect", "lubricate", "calibrate", "replace", "clean", "tighten", "measure", "drain", "record",
            "photograph", "label", "test", "adjust", "seal", "paint", "weigh", "align", "polish", "flush", "rinse")
_PARTS = ("bearing", "gasket", "belt", "sensor", "nozzle", "hinge", "cable", "fuse", "spring", "gauge", "bolt",
          "hose", "blade", "coil", "lens", "latch", "pulley", "shaft", "wheel", "clamp")
_TIMES = ("every morning", "after each shift", "once a week", "before winter", "every spring", "twice a month",
          "after heavy rain", "before the audit", "every evening", "once a quarter")
_SYLLABLES = ("ka", "ro", "vel", "tim", "bu", "sko", "ran", "dil", "mo", "zu", "pex", "lar", "qui", "nor", "fa", "gre")
_LOOKALIKE = ("Incident {code} reports that the packaging line stopped during the night shift and the operator "
              "restarted it after checking the emergency stop circuit and the guard door switches.")


def calibration_documents(*, distinct: int = 90, lookalike: int = 60, seed: int = 7) -> list[dict[str, str]]:
    """BEIR rows ({"_id", "title", "text"}), deterministic for a seed."""
    rng = random.Random(seed)
    rows = []
    for i in range(distinct):
        subject, place = _SUBJECTS[i % len(_SUBJECTS)], _PLACES[(i * 7) % len(_PLACES)]
        sentences = [f"In the {place} the technicians {rng.choice(_ACTIONS)} the {subject} {rng.choice(_PARTS)} "
                     f"{rng.choice(_TIMES)} and {rng.choice(_ACTIONS)} the {rng.choice(_PARTS)} next to it."
                     for _ in range(3)]
        rows.append({"_id": f"distinct-{i:03d}", "title": f"{subject} care in the {place}", "text": " ".join(sentences)})
    codes: set[str] = set()
    while len(codes) < lookalike:
        codes.add("".join(rng.choice(_SYLLABLES) for _ in range(4)))
    for i, code in enumerate(sorted(codes)):
        rows.append({"_id": f"lookalike-{i:03d}", "title": "Packaging line incident", "text": _LOOKALIKE.format(code=code)})
    return rows


def write_calibration_corpus(path: Path, **kwargs: int) -> Path:
    """The corpus as a BEIR corpus.jsonl at `path` (returned)."""
    path.write_text("".join(json.dumps(row) + "\n" for row in calibration_documents(**kwargs)), encoding="utf-8")
    return path
