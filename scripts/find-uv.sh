# Sourced by the setup scripts that build venvs of their own (setup-upstreams.sh, setup-clients.sh), after they set
# $root and define die(): sets $UV to the uv scripts/setup.sh found or installed, and the flags every venv uses.
if command -v uv >/dev/null 2>&1; then
    UV="$(command -v uv)"
elif [ -x "$root/.cache/uv/bin/uv" ]; then
    UV="$root/.cache/uv/bin/uv"
else
    die "uv is neither on PATH nor in .cache/uv; run scripts/setup.sh first"
fi
export UV_PYTHON_DOWNLOADS=never

# Debian's interpreter when there is one: world-readable and independent of anyone's pyenv; else what uv finds.
if [ -x /usr/bin/python3 ]; then python=(--python /usr/bin/python3); else python=(); fi
