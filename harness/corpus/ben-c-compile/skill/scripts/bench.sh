#!/bin/bash
set -e
here="$(cd "$(dirname "$0")/.." && pwd)"
out=$(mktemp -d)
for o in O0 O2; do
  cc -"$o" -o "$out/bench-$o" "$here/assets/bench.c"
  printf '%s: ' "$o"; "$out/bench-$o"
done
rm -rf "$out"
