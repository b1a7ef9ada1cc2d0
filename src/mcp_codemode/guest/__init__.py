"""The guest: the code that runs inside every sandbox, standard library only, and never imports host code.

``boot`` starts ``worker``, which runs cells (``worker_cells``), captures output (``worker_capture``) and speaks
frames with the host (``worker_channel``); ``mcp/`` is the API sandboxed code imports as ``mcp``. ``protocol`` is
the one module both sides import: the frame types, limits and rules the host checks the guest against.
"""
