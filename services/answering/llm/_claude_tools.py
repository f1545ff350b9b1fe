"""The shared tools (services.answering.llm._tools) in the Messages API's shape, and the one
forced tool call read back out of Claude's response."""

from __future__ import annotations

from typing import Any

from anthropic.types import Message, TextBlock, ToolParam, ToolUseBlock

from services.answering.llm._tools import Malformed, Refused, Tool, check


def claude_tool(tool: Tool) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.schema}


def tool_input(response: Message, tool: Tool) -> dict[str, Any]:
    """The validated input of the one forced tool call in `response`."""
    if response.stop_reason == "refusal":
        details = response.stop_details
        raise Refused(details.explanation if details and details.explanation else "no explanation given")
    calls = [block for block in response.content if isinstance(block, ToolUseBlock)]
    if not calls:
        text = " ".join(block.text for block in response.content if isinstance(block, TextBlock))
        raise Malformed(f"no {tool.name} tool call in the response (stop_reason {response.stop_reason!r}); "
                        f"it said: {text[:120]!r}")
    if len(calls) != 1 or calls[0].name != tool.name:
        raise Malformed(f"expected one {tool.name} tool call, got {', '.join(c.name for c in calls)}")
    if response.stop_reason == "max_tokens":
        raise Malformed(f"the {tool.name} call was cut off by max_tokens; raise LLM_MAX_TOKENS")
    data = dict(calls[0].input)
    check(data, tool.schema, "input")
    return data
