#!/bin/bash
[ "$(uname -s)" = Darwin ] || { echo "macOS only"; exit 0; }
echo "macOS $(sw_vers -productVersion)"
pbpaste | head -n 20 | awk -F'\t' 'NR==1{h="|";s="|";for(i=1;i<=NF;i++){h=h" "$i" |";s=s"---|"};print h;print s;next}{r="|";for(i=1;i<=NF;i++)r=r" "$i" |";print r}' > clipboard-table.md
echo "wrote clipboard-table.md"
