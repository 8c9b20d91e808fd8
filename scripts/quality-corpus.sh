#!/usr/bin/env bash
# The text the compression-quality model is trained and measured on: the Linux
# kernel's documentation (Debian's linux-doc-6.1, reStructuredText sources).
#
#   scripts/quality-corpus.sh [OUT_DIR]     (default build/quality)
#
# Writes OUT_DIR/train.txt and OUT_DIR/heldout.txt. A file goes to the held-out
# set when the last hex digit of the md5 of its path inside the package is 0 (1 file in 16, the
# same on every machine), so no held-out text is ever trained on. Files are taken in
# sorted order and separated by a blank line. Needs apt (the package is
# downloaded, not installed) and about 250 MB of scratch space.
set -euo pipefail
out=${1:-build/quality}
mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
apt-get download linux-doc-6.1 > /dev/null 2>&1 || {
  echo "quality-corpus: 'apt-get download linux-doc-6.1' failed (is apt reachable?)" >&2
  exit 1
}
dpkg -x linux-doc-6.1_*.deb x
root=x/usr/share/doc/linux-doc-6.1/Documentation
: > "$out/train.txt"
: > "$out/heldout.txt"
find "$root" -name '*.rst.gz' -printf '%P\n' | LC_ALL=C sort | while read -r path; do
  digest=$(printf '%s' "$path" | md5sum | cut -c32)
  if [[ $digest == 0 ]]; then dest=$out/heldout.txt; else dest=$out/train.txt; fi
  zcat "$root/$path" >> "$dest"
  printf '\n\n' >> "$dest"
done
echo "quality-corpus: $(wc -c < "$out/train.txt") bytes of training text, $(wc -c < "$out/heldout.txt") held out, in $out"
