"""Provisioning: what a user needs besides the package itself, built by the package itself.

``image`` builds the container image from Debian packages, ``sandbox_env`` keeps the bubblewrap sandbox's
virtual environment, ``image_packages`` layers packages onto a container image, ``installer`` finds uv or pip on
the host, and ``steps`` runs the long commands with their output shown as it comes. None of them needs a file of
the repository, so a wheel installed with ``uv tool install`` or ``pipx install`` can set everything up.
"""

# What the command line offers and shows, here so that it does without loading the rest: the backends whose sandboxes
# provisioning changes, and where the image's Debian comes from by default.
BACKENDS = ("bubblewrap", "podman", "docker")
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
