"""Helpers the test modules share: plain functions and constants, never fixtures, and never a test.

Fixtures live in the conftest files (pytest finds them there by itself); what a test imports by name lives here,
so no test module imports another one and running one test file never collects the tests of another. Each
module is named for what it helps with: ``backends`` (settings for a real sandbox, and the CI rule that a missing
backend fails instead of skipping), ``processes`` (what is still running after a test), ``clients`` (real MCP
clients against a real ``mcp-codemode serve``), ``upstreams`` (the real upstream MCP servers), ``cells`` (running
guest code through a ``Bridge`` and reading what it reported), ``inspector`` (the Node tools: MCP Inspector,
conformance suite, a bridge over HTTP) and ``fuzzing`` (hypothesis strategies and a loop on a thread).
"""
