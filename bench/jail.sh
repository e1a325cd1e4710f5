#!/usr/bin/env bash
# Jail and tracer benchmarks, side by side with their anchors in one run; prints ratios.
#   (a) jail start-to-exit for /bin/true vs plain fork+exec and vs bwrap --unshare-all
#   (b) tracer overhead: import-heavy Python and a 20,000-open loop, traced vs the same jail
#       untraced, vs strace -f and strace -f --seccomp-bpf (unpinned)
#   (c) the whole `observe` on a no-op skill
# RUNS (default 30) runs per command, in ROUNDS (default 5) alternating rounds.
# Needs: hyperfine, bubblewrap, strace (apt-get install -y hyperfine bubblewrap strace).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p skill-observer --bins
OBS=./target/release/observe
OUT=${BENCH_OUT:-bench/out}
mkdir -p "$OUT"
RUNS=${RUNS:-30}

binds=()
for p in /usr /bin /sbin /lib /lib64 /etc; do
  if [ -L "$p" ]; then binds+=(--symlink "$(readlink "$p")" "$p"); elif [ -e "$p" ]; then binds+=(--ro-bind "$p" "$p"); fi
done
BWRAP="bwrap --unshare-all --die-with-parent ${binds[*]} --proc /proc --dev /dev --tmpfs /tmp"

PY_IMPORT='import json, email.parser, http.client, xml.dom.minidom, unittest, asyncio, decimal, argparse, logging, sqlite3, ssl, csv, zipfile, tarfile, urllib.request'
PY_OPENS='import os
for i in range(20000):
    os.close(os.open("/etc/hostname", os.O_RDONLY))'

# Other work on a shared 2-core machine makes the load drift within a minute, so every command
# of a comparison runs in short alternating rounds instead of one long block each; the rounds'
# times are pooled into "$OUT/NAME.json" (hyperfine's layout: results[i].mean/median/times).
ROUNDS=${ROUNDS:-5}
paired() {
  local name=$1; shift
  local per=$(( (RUNS + ROUNDS - 1) / ROUNDS ))
  for r in $(seq "$ROUNDS"); do
    hyperfine -N -w 1 -r "$per" --export-json "$OUT/$name-$r.json" "$@" >/dev/null
  done
  python3 - "$OUT" "$name" "$ROUNDS" <<'PY'
import json, statistics, sys
out, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = None
for r in range(1, rounds + 1):
    res = json.load(open(f"{out}/{name}-{r}.json"))["results"]
    times = times or [[] for _ in res]
    for i, x in enumerate(res):
        times[i] += x["times"]
json.dump({"results": [{"mean": statistics.mean(t), "median": statistics.median(t),
                        "min": min(t), "times": t} for t in times]},
          open(f"{out}/{name}.json", "w"))
PY
}

mean() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['mean'])" "$1" "$2"; }
median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}x')" "$1" "$2"; }
ms() { python3 -c "import sys; print(f'{float(sys.argv[1])*1000:.1f} ms')" "$1"; }

if [ -z "${WORKLOADS:-}" ]; then
echo "== (a) start-to-exit of /bin/true"
# `--bare`: the jail alone (namespaces, tmpfs root with the system binds, landlock, seccomp,
# rlimits, the per-run cgroup), as bwrap is a jail alone; the last row adds the full image with
# its planted credentials and egress capture.
paired a \
  "/bin/true" \
  "$BWRAP /bin/true" \
  "$OBS jail-exec --bare --untraced -q -- /bin/true" \
  "$OBS jail-exec --bare -q -- /bin/true" \
  "$OBS jail-exec -q -- /bin/true"
a0=$(mean "$OUT/a.json" 0); a1=$(mean "$OUT/a.json" 1); a2=$(mean "$OUT/a.json" 2); a3=$(mean "$OUT/a.json" 3); a4=$(mean "$OUT/a.json" 4)
echo "fork+exec $(ms "$a0") | bwrap $(ms "$a1") | observe jail, untraced $(ms "$a2") | observe jail, traced $(ms "$a3") | traced with full image + egress $(ms "$a4")"
echo "jail(untraced)/bwrap = $(ratio "$a2" "$a1"); jail(traced)/bwrap = $(ratio "$a3" "$a1"); jail(untraced)/fork+exec = $(ratio "$a2" "$a0")"
fi

for w in ${WORKLOADS:-import opens}; do
  if [ $w = import ]; then code=$PY_IMPORT; else code=$PY_OPENS; fi
  printf '%s\n' "$code" > "$OUT/$w.py"
  echo "== (b) tracer overhead: $w"
  paired "b-$w" \
    "$OBS jail-exec --bare --untraced -q -- python3 -c '$code'" \
    "$OBS jail-exec --bare -q -- python3 -c '$code'" \
    "strace -f -qq -o /dev/null /usr/bin/python3 $OUT/$w.py" \
    "strace -f -qq --seccomp-bpf -e trace=open,openat,execve,connect,unlink -o /dev/null /usr/bin/python3 $OUT/$w.py" \
    "/usr/bin/python3 $OUT/$w.py"
  u=$(mean "$OUT/b-$w.json" 0); t=$(mean "$OUT/b-$w.json" 1); s1=$(mean "$OUT/b-$w.json" 2); s2=$(mean "$OUT/b-$w.json" 3); h=$(mean "$OUT/b-$w.json" 4)
  echo "untraced jail $(ms "$u") | traced jail $(ms "$t") | strace -f $(ms "$s1") | strace -f --seccomp-bpf $(ms "$s2") | host $(ms "$h")"
  echo "traced/untraced = $(ratio "$t" "$u"); strace -f/host = $(ratio "$s1" "$h"); strace --seccomp-bpf/host = $(ratio "$s2" "$h")"
  um=$(median "$OUT/b-$w.json" 0); tm=$(median "$OUT/b-$w.json" 1)
  echo "medians: untraced jail $(ms "$um") | traced jail $(ms "$tm") | traced/untraced = $(ratio "$tm" "$um")"
done

# WORKLOADS=import (or opens) runs just that part of (b).
[ -n "${WORKLOADS:-}" ] && exit 0
echo "== (c) whole observe on a no-op skill"
noop=$(mktemp -d); mkdir -p "$noop/noop/scripts"
printf -- '---\nname: noop\ndescription: does nothing\n---\nRun scripts/noop.sh.\n' > "$noop/noop/SKILL.md"
printf '#!/bin/sh\ntrue\n' > "$noop/noop/scripts/noop.sh"
hyperfine -N -w 2 -r "$RUNS" -i --export-json "$OUT/c.json" "$OBS $noop/noop --report /dev/null" >/dev/null
c=$(mean "$OUT/c.json" 0)
cmed=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['median'])" "$OUT/c.json")
cmin=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['min'])" "$OUT/c.json")
echo "observe no-op skill: mean $(ms "$c"), median $(ms "$cmed"), min $(ms "$cmin") (target < 150 ms)"
rm -rf "$noop"
