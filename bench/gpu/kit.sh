#!/usr/bin/env bash
# Build the aihwkit kit that a device call carries (docs/gpu.md, "The aihwkit kit"): the device
# image has torch but no aihwkit and no package registry, and aihwkit's compiled core must match
# the image's Python and torch. Run it here, at the repository root, before a GPU window:
#
#     bash bench/gpu/kit.sh          # about 8-10 minutes on 2 cores; writes .gpu/ (ignored)
#
# .gpu/ then holds the aihwkit wheel (CPU tiles: the truth's fast path runs on CUDA, aihwkit's
# tiles only need to load), aihwkit-lightning's (HWA trains with it) and openblas.tar.xz (the OpenBLAS it links, with its Fortran runtime).
# The kit lives in the ignored .gpu/, so a new machine builds it again; `window.sh` installs it.
#
# Knobs (environment): KIT (.gpu), PY312 (a Python 3.12, the image's), TORCH (2.11.0, the
# image's), AIHWKIT (1.2.0), LIGHTNING (2.1.0), SDIST_SHA256 (uv.lock's hash of that sdist), WORK (/tmp/hwnas-kit).
set -euo pipefail
KIT=${KIT:-.gpu}
if [ -z "${PY312:-}" ]; then  # the first that runs (pyenv's shim exists but may refuse)
  for py in "$HOME/.pyenv/versions/3.12.1/bin/python3.12" python3.12; do
    "$py" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { PY312=$py; break; }
  done
fi
PY312=${PY312:-none}
TORCH=${TORCH:-2.11.0}
AIHWKIT=${AIHWKIT:-1.2.0}
LIGHTNING=${LIGHTNING:-2.1.0}
SDIST_SHA256=${SDIST_SHA256:-288b00aed52a99f578a2e7ac46fdbf2a9f07e4780c4307eae5827558f1bf2cba}
WORK=${WORK:-/tmp/hwnas-kit}

"$PY312" -c '' 2>/dev/null || { echo "kit: no Python 3.12 at '$PY312' (the device image's); set PY312" >&2; exit 2; }
if compgen -G "$KIT/aihwkit-$AIHWKIT-*.whl" > /dev/null && [ -f "$KIT/openblas.tar.xz" ] \
    && [ -f "$KIT/aihwkit_lightning-$LIGHTNING-py3-none-any.whl" ]; then
  echo "kit: $KIT already holds aihwkit $AIHWKIT, aihwkit-lightning $LIGHTNING and openblas.tar.xz"
  exit 0
fi
mkdir -p "$KIT" "$WORK"
# 1. A build environment under the image's torch (the wheel compiles against its headers).
[ -x "$WORK/venv/bin/pip" ] || "$PY312" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "torch==$TORCH" 'scikit-build>=0.18.1' 'cmake>=4.2.1' \
    'pybind11>=3.0.1' ninja mypy numpy scipy
# 2. The sdist the lock file names (its address and hash), checked against that hash.
url=$(grep -o "https://[^\"]*/aihwkit-$AIHWKIT.tar.gz" uv.lock | head -1)
[ -n "$url" ] || { echo "kit: uv.lock names no aihwkit-$AIHWKIT sdist" >&2; exit 2; }
"$PY312" -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
    "$url" "$WORK/aihwkit-$AIHWKIT.tar.gz"
echo "$SDIST_SHA256  $WORK/aihwkit-$AIHWKIT.tar.gz" | sha256sum -c -
# 3. The wheel (no build isolation: it must see the torch installed above).
PATH="$WORK/venv/bin:$PATH" "$WORK/venv/bin/pip" wheel -q --no-deps --no-build-isolation \
    -w "$KIT" "$WORK/aihwkit-$AIHWKIT.tar.gz"
# 4. aihwkit-lightning, which HWA trains with (pure Python: its wheel as uv.lock names it).
lurl=$(grep -o "https://[^\"]*/aihwkit_lightning-$LIGHTNING-py3-none-any.whl" uv.lock | head -1)
lsha=$(grep -o "aihwkit_lightning-$LIGHTNING-py3-none-any.whl\", hash = \"sha256:[0-9a-f]*" uv.lock \
       | head -1 | sed 's/.*sha256://')
[ -n "$lurl" ] && [ -n "$lsha" ] || { echo "kit: uv.lock names no aihwkit-lightning $LIGHTNING wheel" >&2; exit 2; }
"$PY312" -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
    "$lurl" "$KIT/aihwkit_lightning-$LIGHTNING-py3-none-any.whl"
echo "$lsha  $KIT/aihwkit_lightning-$LIGHTNING-py3-none-any.whl" | sha256sum -c -
# 5. The shared libraries it links that the image lacks (OpenBLAS and its Fortran runtime).
rm -rf "$WORK/lib" && mkdir -p "$WORK/lib"
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$WORK/lib/"
done
tar -cJf "$KIT/openblas.tar.xz" -C "$WORK/lib" .
# 6. It must import and run under that torch, with only the kit's libraries added.
LD_LIBRARY_PATH="$WORK/lib" "$WORK/venv/bin/pip" install -q --no-deps --force-reinstall \
    "$KIT"/*.whl
LD_LIBRARY_PATH="$WORK/lib" "$WORK/venv/bin/python" - <<'EOF'
import torch
from aihwkit.nn import AnalogLinear
import aihwkit_lightning.nn  # noqa: F401  (HWA's engine)
y = AnalogLinear(4, 2)(torch.ones(1, 4))
print("kit: aihwkit and aihwkit-lightning import, an AnalogLinear runs under torch",
      torch.__version__, tuple(y.shape))
EOF
ls -la "$KIT"
