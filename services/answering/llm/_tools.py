"""The tools an LLM backend forces the model to call, one per operation, and the validation of
what comes back. Provider-neutral: each backend sends these in its own API's shape (Claude's
tools in _claude_tools.py, OpenAI function tools in openai_backend.py), so every backend asks
the same questions and accepts the same answers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Bump an operation's version whenever its system prompt, user message or tool schema changes.
# generate-v2, reflect-v2, identify_gaps-v2: documents found by gap queries are labelled as additional context
# (the prompt for chunks without any is unchanged).
PROMPT_VERSIONS = {
    "generate": "generate-v2",
    "reflect": "reflect-v2",
    "grade": "grade-v1",
    "identify_gaps": "identify_gaps-v2",
    "refine_query": "refine_query-v2",
    "decompose": "decompose-v1",
}


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


def _texts(description: str, **limits: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "minLength": 1}, "description": description, **limits}


def _flag(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


@dataclass(frozen=True)
class Tool:
    """The tool the model is forced to call for one operation, and the instructions around it."""

    operation: str
    name: str
    description: str
    schema: dict[str, Any]
    system: str

    @property
    def version(self) -> str:
        return PROMPT_VERSIONS[self.operation]


TOOLS = {tool.operation: tool for tool in (
    Tool("generate", "submit_answer", "Submit the answer and the passages it cites.", _object(
        answer=_text("The answer, citing the documents it relies on as [n], n being the Document number."),
        citations={"type": "array", "description": "One entry per cited passage.", "items": _object(
            document={"type": "integer", "minimum": 1, "description": "The Document number cited as [n]."},
            quote=_text("The supporting sentence(s), copied exactly as they appear in that document."),
        )},
    ), "You answer questions using only the numbered documents you are given. Cite every claim as [n], "
       "n being the number of the Document that supports it. If the documents do not contain the answer, "
       "say so plainly and cite nothing. Submit the answer with the submit_answer tool."),
    Tool("reflect", "submit_reflection", "Submit the grounding assessment of the answer.", _object(
        answer_grounded=_flag("True if the documents support the answer's claims."),
        hallucination_detected=_flag("True if the answer states anything the documents do not support."),
        reflection_score={"type": "number", "minimum": 0, "maximum": 1,
                          "description": "Overall grounding: 1.0 every claim supported, 0.0 unsupported."},
        sources_cited=_texts('Numbers of the Documents that support the answer, as strings, e.g. ["1", "3"].'),
        reflection_reason=_text("A short explanation of the assessment."),
        needs_regeneration=_flag("True if the answer should be regenerated from better retrieval."),
    ), "You check whether an answer is grounded in the numbered documents it was written from. Judge only "
       "against those documents, not your own knowledge. Submit your assessment with the submit_reflection tool."),
    Tool("grade", "submit_grade", "Submit the adequacy grade of the answer.", _object(
        score={"type": "integer", "minimum": 1, "maximum": 5, "description": "Adequacy, 1-5, per the rubric."},
        gaps=_texts("Specific information the answer is missing (empty if none)."),
        refinements=_texts("Follow-up search queries that would fill the gaps (empty if none)."),
    ), "You grade how adequately an answer addresses a question, on this scale:\n"
       "5 = fully answers with specific, actionable details\n4 = mostly answers, minor gaps\n"
       "3 = partially answers, significant gaps\n2 = tangentially relevant\n1 = does not answer the question\n"
       "Submit the grade with the submit_grade tool."),
    Tool("identify_gaps", "submit_gaps", "Submit the information gaps in the answer.", _object(
        gaps=_texts("Concrete pieces of information missing from the answer; empty if it is complete."),
    ), "You find what specific information is missing for an answer to fully address a question. List only "
       "concrete gaps (e.g. 'the torque value for step 3'), never vague suggestions. If the answer is complete, "
       "submit an empty list. Submit them with the submit_gaps tool."),
    Tool("refine_query", "submit_query", "Submit the refined search query.", _object(
        query=_text("One search query, ready to run."),
    ), "You rewrite a search query so that a document search finds what the previous attempt missed. Keep the "
       "original intent, add specific terms for the information the answer is missing, and submit one query "
       "with the submit_query tool."),
    Tool("decompose", "submit_sub_queries", "Submit the sub-questions.", _object(
        sub_queries=_texts("Self-contained sub-questions, each answerable by one search.", minItems=1, maxItems=6),
    ), "You break a complex question into 2 to 4 self-contained sub-questions that can each be answered by a "
       "separate document search. Submit them with the submit_sub_queries tool."),
)}


class Malformed(Exception):
    """A response that does not carry a valid tool call; becomes LLMError(kind="malformed")."""


class Refused(Exception):
    """The model declined the request; becomes LLMError(kind="refusal")."""


def check(value: Any, schema: dict[str, Any], path: str) -> None:
    """Raise Malformed naming the first place `value` breaks `schema` (the subset our tools use)."""
    kind = schema["type"]
    shown = repr(value)[:80]
    if kind == "object":
        if not isinstance(value, dict):
            raise Malformed(f"{path} must be an object, got {shown}")
        missing = [name for name in schema["required"] if name not in value]
        if missing:
            raise Malformed(f"{path} is missing {', '.join(missing)}")
        unknown = sorted(set(value) - set(schema["properties"]))
        if unknown:
            raise Malformed(f"{path} has unexpected field(s) {', '.join(unknown)}")
        for name, field_schema in schema["properties"].items():
            check(value[name], field_schema, f"{path}.{name}")
    elif kind == "array":
        if not isinstance(value, list):
            raise Malformed(f"{path} must be a list, got {shown}")
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", math.inf):
            raise Malformed(f"{path} has {len(value)} items, expected {schema.get('minItems', 0)}"
                            f"..{schema.get('maxItems', 'any')}")
        for i, item in enumerate(value):
            check(item, schema["items"], f"{path}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            raise Malformed(f"{path} must be a string, got {shown}")
        if schema.get("minLength") and not value.strip():
            raise Malformed(f"{path} is blank")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise Malformed(f"{path} must be true or false, got {shown}")
    else:  # integer or number; bool is an int subclass in Python but not a JSON number
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or (kind == "integer" and not float(value).is_integer()):
            raise Malformed(f"{path} must be {'an integer' if kind == 'integer' else 'a number'}, got {shown}")
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if not low <= value <= high:
            raise Malformed(f"{path} is {value}, outside {low}..{high}")
