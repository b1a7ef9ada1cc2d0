"""A pydantic-ai ``Agent`` with the bridge as an ``MCPToolset``, its model a ``FunctionModel`` (no LLM).

The model function plays an LLM that runs each prompt as code: on a prompt it asks for ``run_python`` with the
prompt as ``code``; once the tool's answer is in the conversation it records that answer exactly as pydantic-ai
renders it for a model (``ToolReturnPart.model_response_str()``, or ``RetryPromptPart.model_response()`` when the
tool failed and pydantic-ai asks the model to retry) plus the media types of any images it was handed, and ends
the run. So the JSON this prints is what a pydantic-ai agent sees, with the library's defaults (``MCPToolset``'s
``tool_error_behavior='retry'``, its content mapping). The one default changed is ``init_timeout`` (5 s), which a
busy machine's first bridge start can exceed (120 s here, for loaded CI machines; docs/clients.md recommends 30 s).

Each step is its own ``agent.run``, as an application makes one per user prompt; the toolset stays connected
across them inside ``async with agent`` (docs/clients.md says why).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.clients.scenario import IMAGE, STATE_GET, STATE_SET, TRACEBACK, Target, report, target


def images_in(content: Any) -> list[str]:
    items = content if isinstance(content, list) else [content]
    return [item.media_type for item in items if isinstance(item, BinaryContent) and item.is_image]


class Coder:
    """The stand-in for an LLM: runs the prompt as code, then notes what came back."""

    def __init__(self, attempts: int = 1) -> None:
        self.attempts = attempts  # tool calls per run: more than one runs the same code again after each answer
        self.seen: list[dict[str, Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        prompt = next(
            part.content for message in messages for part in message.parts if isinstance(part, UserPromptPart)
        )
        answers = [part for part in last.parts if isinstance(part, ToolReturnPart | RetryPromptPart)]
        if not answers:
            return ModelResponse(parts=[ToolCallPart("run_python", {"code": prompt})])
        shown: list[str] = []
        images: list[str] = []
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                shown.append(part.model_response_str())
                images += images_in(part.content)
            elif isinstance(part, RetryPromptPart):
                shown.append(part.model_response())
            elif isinstance(part, UserPromptPart):  # where pydantic-ai may move a tool's images for the model
                images += images_in(part.content)
        self.seen.append({"shown": "\n".join(shown), "images": images, "tools": [t.name for t in info.function_tools]})
        if sum(isinstance(message, ModelResponse) for message in messages) < self.attempts:
            return ModelResponse(parts=[ToolCallPart("run_python", {"code": prompt})])
        return ModelResponse(parts=[TextPart("done")])


def toolset_for(where: Target, **options: Any) -> MCPToolset[None]:
    """The bridge as an ``MCPToolset``, as docs/clients.md writes it (``options``: MCPToolset's own)."""
    if where["transport"] == "stdio":
        transport = StdioTransport(where["command"], where["args"], env=where["env"])
        return MCPToolset(transport, init_timeout=120, **options)
    return MCPToolset(where["url"], headers=where.get("headers"), init_timeout=120, **options)


async def drive(where: Target) -> dict[str, Any]:
    coder = Coder()
    agent = Agent(FunctionModel(coder), toolsets=[toolset_for(where)])
    async with agent:
        for code in (STATE_SET, STATE_GET, TRACEBACK, IMAGE):
            await agent.run(code)
    _set, state, failure, image = coder.seen
    # tool_error_behavior="failed", which docs/clients.md recommends: with the default ("retry"), a second failed
    # call in a row ends the run with UnexpectedModelBehavior; "failed" hands every failure to the model.
    failing = Coder(attempts=3)
    async with Agent(FunctionModel(failing), toolsets=[toolset_for(where, tool_error_behavior="failed")]) as agent:
        await agent.run(TRACEBACK)
    return {
        "tools": state["tools"],
        "state": state["shown"],
        "traceback": failure["shown"],
        "images": image["images"],
        "image_shown": image["shown"],
        "failed_tracebacks": [seen["shown"] for seen in failing.seen],
    }


if __name__ == "__main__":
    report(asyncio.run(drive(target())))
