"""The policy: what sandboxed code may reach through the bridge, and its enforcement on every use.

``rules`` is the ``[policy]`` table as a value (which servers, tools, resources and prompts; the caps; the matching
and the refusal sentences), pure and stateless: the settings build it, so it stands in the core with them, and the
tool directory applies it to every listing through the questions ``upstream/tools/gate.py`` declares. ``guard`` enforces
it on each use of a server that sandboxed code makes (the refusals, the run's call budget, the rate per owner, the
user's approval of what ``ask_tools`` names, the audit line), so it works on a run and stands in the run service's
layer; the relay calls it for every tool call, resource read and prompt get. Nothing is imported here, so reading
the rules never loads the guard.
"""
