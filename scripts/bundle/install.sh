#!/bin/bash
# On the target host (no package index): put the bundle's chunks together, check them, unpack.
# Chunks may arrive in separate transfers (a device command that carries one at a time): each run
# stashes the chunks it finds beside this script, checked against SHA256SUMS, and unpacks once all
# are there. Then: `source DEST/env.sh` puts the tree first on PYTHONPATH (nothing in the image's
# site-packages is changed).
# usage: bash install.sh [--dest DIR] [--stash DIR] [--check]    (defaults /tmp/servetune-site, /tmp/servetune-chunks;
#        the check runs $PYTHON, default python3)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=/tmp/servetune-site; STASH=/tmp/servetune-chunks; CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) DEST=$2; shift 2 ;;
    --stash) STASH=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    *) echo "error: unknown argument $1; usage: install.sh [--dest DIR] [--stash DIR] [--check]" >&2; exit 2 ;;
  esac
done
SUMS=$HERE/SHA256SUMS
[ -f "$SUMS" ] || { echo "error: $SUMS missing; fix: copy the bundle's SHA256SUMS beside install.sh" >&2; exit 2; }
TARBALL=$(tail -1 "$SUMS" | awk '{print $2}'); WANT=$(tail -1 "$SUMS" | awk '{print $1}')
mkdir -p "$STASH"
for c in "$HERE"/chunk_*; do
  [ -f "$c" ] || continue
  n=$(basename "$c")
  if ! grep -q "  $n\$" "$SUMS"; then echo "error: $n is not listed in SHA256SUMS (another bundle?)" >&2; exit 2; fi
  (cd "$HERE" && grep "  $n\$" "$SUMS" | sha256sum -c --quiet -) || { echo "error: $n is damaged; send it again" >&2; exit 2; }
  cp "$c" "$STASH/$n" && echo "stashed $n"
done
if [ -f "$DEST/.complete" ] && [ "$(cat "$DEST/.complete")" = "$WANT" ]; then
  echo "already installed in $DEST"
else
  need=$(grep -c "  chunk_" "$SUMS"); have=$(ls "$STASH" | grep -c "^chunk_" || true)
  if [ "$have" -lt "$need" ]; then echo "have $have of $need chunks; run again with the others"; exit 0; fi
  t0=$(date +%s)
  (cd "$STASH" && grep "  chunk_" "$SUMS" | sha256sum -c --quiet -) || { echo "error: a stashed chunk is damaged" >&2; exit 2; }
  cat $(grep "  chunk_" "$SUMS" | awk '{print "'"$STASH"'/"$2}') > "$STASH/$TARBALL"
  echo "$WANT  $STASH/$TARBALL" | sha256sum -c --quiet - || { echo "error: the joined tarball does not match" >&2; exit 2; }
  rm -rf "$DEST" && mkdir -p "$DEST"
  xz -dc -T0 "$STASH/$TARBALL" | tar -xf - -C "$DEST"
  rm -f "$STASH/$TARBALL"
  echo "export PYTHONPATH=$DEST\${PYTHONPATH:+:\$PYTHONPATH}" > "$DEST/env.sh"
  cp "$HERE/manifest.json" "$HERE/check_imports.py" "$DEST/"
  echo "$WANT" > "$DEST/.complete"
  echo "unpacked in $(( $(date +%s) - t0 )) s into $DEST ($(du -sh "$DEST" | cut -f1)); next: source $DEST/env.sh"
fi
if [ "$CHECK" = 1 ]; then
  PYTHONPATH=$DEST${PYTHONPATH:+:$PYTHONPATH} "${PYTHON:-python3}" "$DEST/check_imports.py"
fi
