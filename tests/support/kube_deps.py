"""Whether the Kubernetes stand-ins can load: the dev group installs kmock and the kubernetes extra.

A test module imports the stand-ins only when they can load, and each test calls ``require_kube_test_deps``: under
``CI=true`` a missing dependency fails the test, elsewhere it skips saying how to install it.
"""

from __future__ import annotations

from .backends import fail_unless

try:
    import kmock  # noqa: F401
    import kubernetes_asyncio  # noqa: F401
except ImportError as exc:
    KUBE_TEST_DEPS_PROBLEM = f"the Kubernetes test dependencies are missing ({exc}); run scripts/setup.sh"
else:
    KUBE_TEST_DEPS_PROBLEM = ""


def require_kube_test_deps() -> None:
    fail_unless(not KUBE_TEST_DEPS_PROBLEM, KUBE_TEST_DEPS_PROBLEM)
