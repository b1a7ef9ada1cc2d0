"""The cluster's API, as every part that speaks to it needs it: the client and its errors (``api``), the names and
labels of the bridge's objects there (``naming``), the one table of what the face's Role allows (``permissions``),
the session and liveness Leases of replicas that share sessions (``leases``), and the shared state's Secret and
ConfigMaps (``shared_state``).

Why a package of its own, below the backend and the face: the kubernetes backend (``sandbox/kube/``) claims
sandboxes through this client, the face's replicas (``face/replicas.py``) hold and forward sessions through its
Leases, and the run service keeps sign-ins and saved tools in its objects; none of them may reach into another's
part for it. It knows nothing of how a sandbox runs code, of sessions or of MCP, and imports the optional Kubernetes
client (``pip install 'mcp-codemode[kubernetes]'``) only inside the functions that need it.
"""
