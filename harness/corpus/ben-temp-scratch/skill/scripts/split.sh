#!/bin/bash
set -e
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
for i in $(seq 1 3000); do echo "$i,item-$i,$((i * 7 % 100))"; done > "$w/export.csv"
split -l 100 -d -a 3 "$w/export.csv" "$w/part-"
n=$(ls "$w"/part-* | wc -l)
cat "$w"/part-* > "$w/joined.csv"
cmp -s "$w/export.csv" "$w/joined.csv" && echo "split into $n parts, round-trip ok"
rm -f "$w"/part-*
f=$(mktemp /tmp/report.XXXXXX); echo "$n parts" > "$f"; rm -f "$f"
