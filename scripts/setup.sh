#!/usr/bin/env bash
# Install everything deepgym_ray and its tests need into ./.venv, and the system packages the
# sandboxes use. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# System packages: bubblewrap isolates each solution, libseccomp builds the local sandbox's
# syscall filter (Debian's packages).
need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
/sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need_apt+=(libseccomp2)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need_apt[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >/dev/null
  else
    log "warning: missing ${need_apt[*]}; solutions will run with weaker isolation"
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of PyTorch must come before trl, or pip pulls a multi-GB CUDA build.
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  log "installing torch (CPU build)"
  .venv/bin/python -m pip install -q torch==2.13.0
fi
log "installing deepgym_ray with its extras"
# The constraint keeps the CPU torch installed above: verl would otherwise pull another build.
# (Read from the installed metadata: importing torch before numpy is there prints a warning.)
echo "torch==$(.venv/bin/python -c 'from importlib.metadata import version; print(version("torch").split("+")[0])')" \
  > .venv/torch-constraint.txt
# setuptools tells every editable install that a same-named folder may shadow the package: it
# is our own folder, so the notice is only noise (the build backend inherits the filter).
PYTHONWARNINGS="ignore:Editable installation" \
  .venv/bin/python -m pip install -q -c .venv/torch-constraint.txt -e '.[test,trl,daytona,e2b,modal,verl,serve,swebench,lm_eval]'
# Axolotl 0.19 (the newest for Python 3.11) pins trl 1.9, datasets 4.x and older pydantic and
# numpy: its own code goes to a folder of its own, without its dependencies, where
# tests/integrations/test_axolotl.py validates our GRPO configs with its schema (in a process
# of its own) and loads our reward function with its loader.
if [ ! -f .venv/axolotl/axolotl/__init__.py ]; then
  log "installing axolotl's code (no dependencies) into .venv/axolotl"
  .venv/bin/python -m pip install -q --no-deps --target .venv/axolotl axolotl==0.19.0 addict==2.4.0
fi
# pip compiles what it installs, but an editable install leaves the package as source: where
# PYTHONDONTWRITEBYTECODE is set (CI machines often set it) every command would compile it
# again, half a second of a short eval's time. (Not the environments' folders: a verifier
# file is a function's body, compiled by the judge.)
.venv/bin/python -m compileall -q -x '/envs/[^/]+/' deepgym_ray >/dev/null
log "done: $(.venv/bin/deepgym-ray --version)"
