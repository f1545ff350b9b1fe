"""The live demo: the demo questions answered with every preset, answer-key verdicts, removal."""

from services.demo.answer_key import DemoQuestion, KeyVerdict, answer_key, key_verdict
from services.demo.runs import (
    DEMO_SOURCE,
    KEYED_PRESETS,
    DemoProgress,
    DemoRemoval,
    DemoStatus,
    DemoSummary,
    demo_status,
    load_demo,
    remove_demo,
)

__all__ = ["DEMO_SOURCE", "KEYED_PRESETS", "DemoProgress", "DemoQuestion", "DemoRemoval", "DemoStatus", "DemoSummary", "KeyVerdict",
           "answer_key", "demo_status", "key_verdict", "load_demo", "remove_demo"]
