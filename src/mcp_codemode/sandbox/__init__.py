"""The sandboxes: where a session's code runs, and the host's side of talking to it.

``select`` picks a backend (bubblewrap, podman or docker, the kubernetes backend in ``kube/``); each backend's
launch hands back a ``channel`` (the guest's byte streams), and ``worker`` drives one sandboxed interpreter over
it: frames (``frames``), cells, interrupts, timeouts, the guest's calls handed to the relay, and death. Everything
the guest sends is hostile here: ``frames``, ``output`` and ``results`` bound and check it before anything above
sees it. This part knows nothing of MCP, sessions or policy; the run service (``runs/``) owns those.
"""
