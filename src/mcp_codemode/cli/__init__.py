"""The command line: ``mcp-codemode`` and its commands, and the checks ``doctor`` runs.

It sits on top of everything else: ``serve`` builds a face over the run service, ``run`` drives the run service
directly, ``servers`` and ``search`` read the upstream layer, ``image`` and ``packages`` call ``provision``, and
``doctor`` gathers what this machine can enforce and judges it with pure rules (``weak_setups``). No other
package imports it, so a library user of the bridge never pays for argument parsing or the checks.
"""
