"""The sandboxes: where a session's code runs, and the host's side of talking to it.

``select`` picks a backend (bubblewrap, podman or docker, the kubernetes backend in ``kube/``); each backend's
launch hands back a ``channel`` (the guest's byte streams), and ``worker`` drives one sandboxed interpreter over
it: frames (``frames``), cells, interrupts, timeouts and death, with the guest's calls relayed to the cell's
request handler by ``calls`` and the client's file requests sent by ``file_requests``. Everything the guest sends
is hostile here: ``frames``, ``output``, ``results``, ``calls`` and ``file_requests`` bound and check it before
anything above sees it. This part knows nothing of MCP, sessions or policy; the run service (``runs/``) owns those.
"""
