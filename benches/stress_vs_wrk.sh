#!/usr/bin/env bash
# `idem-check stress` against a plain load tool (wrk) on the same server, same concurrency, in
# the same run.
#
# Builds the release binaries, then for each run starts a fresh `idem-reference-server` (its own
# process, 127.0.0.1, a free port, an empty SQLite file) per measurement and measures, for the
# same number of seconds and the same number of connections:
#
#   wrk replay  POST /api/payments with ONE Idempotency-Key: after the first request every
#               answer is the stored replay, the cheapest request this server serves.
#   wrk fresh   POST /api/payments with a new Idempotency-Key per request (Lua): every request
#               claims a key, creates a payment and stores its response.
#   wrk mix     a new Idempotency-Key every D requests (Lua), the D duplicates going out on
#               whichever connections are free, mostly at once: the same work as stress (one
#               execution per key, the other duplicates conflicts or replays) without the
#               synchronisation, the judging or the counting. Like with like.
#   stress      `idem-check stress`: per key one synchronised burst of duplicates, then late
#               retries, every key judged and the effect counter read before and after. With
#               8 duplicates a key is 1 execution, 5 conflicts and 2 replays.
#
# It prints every run's requests/s (for wrk mix and stress also the share of 409 answers), the
# median of each, stress's median as a share of each wrk median, and the server's CPU per
# request (from /proc) for each kind: what bounds each rate on a small machine. It also prints
# the client's own CPU per request (user + system, from /usr/bin/time) for wrk mix and stress,
# and the two ratios of issue 33's goal, as medians of the runs: stress's client CPU per
# request over wrk mix's (goal at most 2), and stress's rate over wrk mix's (goal at least 0.8).
# --mix-only leaves out wrk replay and wrk fresh (their columns show "-"). With --memory it
# also runs stress over 20,000 and 200,000 keys under /usr/bin/time -v and prints the checker's
# peak RSS, the count of each status the server answered, and the warnings and errors in the
# server's log (a 503 "storage unavailable" is logged there with its cause).
#
# Usage: benches/stress_vs_wrk.sh [--runs N] [--seconds S] [--concurrency C] [--duplicates D]
#                                 [--rate N] [--http2] [--memory] [--mix-only] [--no-build]
#                                 [--checker PATH]
#                                 [--baseline PATH] [--baseline-server PATH]
# --checker runs another idem-check binary against the same server; --baseline adds, in every
# run, a stress measurement by another build (an older one), so before and after share the run;
# --baseline-server runs that measurement against another idem-reference-server build (the
# older one's), so "before" is the old checker on the old server. --http2 runs stress (and the
# baseline) over h2c, which the reference server speaks on the same port; wrk stays on HTTP/1.1.
# Everything runs on 127.0.0.1; every run is bounded by --seconds (memory runs by their keys).
set -euo pipefail

runs=5
seconds=5
concurrency=64
duplicates=8
rate=""
http2=0
memory=0
mix_only=0
build=1
checker=""
baseline=""
baseline_server=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --duplicates) duplicates="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --http2) http2=1; shift ;;
        --memory) memory=1; shift ;;
        --mix-only) mix_only=1; shift ;;
        --no-build) build=0; shift ;;
        --checker) checker="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --baseline-server) baseline_server="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

need() { # need COMMAND DEBIAN-PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing $2 (for $1)" >&2
        apt-get install -y -q "$2" >/dev/null 2>&1 || {
            apt-get update -q >/dev/null && apt-get install -y -q "$2" >/dev/null
        }
    fi
    command -v "$1" >/dev/null 2>&1 || {
        echo "$1 is missing: install the Debian package $2" >&2
        exit 1
    }
}
need wrk wrk
need python3 python3
[ -x /usr/bin/time ] || need /usr/bin/time time

if [ "$build" = 1 ]; then
    cargo build --release -p idem-check -p idem-reference-server
fi
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
checker="${checker:-$target_dir/release/idem-check}"
work="$(mktemp -d)"
server_bin="$target_dir/release/idem-reference-server"


server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

body='{"amountCents":1250,"currency":"EUR","reference":"bench"}'
cat >"$work/replay.lua" <<EOF
-- Every request carries the same key: one execution, then replays.
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Authorization"] = "Bearer token-a"
wrk.headers["Content-Type"] = "application/json"
function init(args)
    wrk.headers["Idempotency-Key"] = '"wrk-replay-' .. args[1] .. '"'
end
EOF
# keyed_lua PER-KEY: the body of a wrk script that sends a new Idempotency-Key every PER-KEY
# requests of a thread (1: every request; D: the mix), on whichever connections are free.
keyed_lua() {
    cat <<EOF
wrk.method = "POST"
wrk.body = '$body'
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("tid", threads)
end
local tag
local n = 0
function init(args)
    tag = args[1]
end
function request()
    local key = math.floor(n / $1)
    n = n + 1
    return wrk.format(nil, nil, {
        ["Authorization"] = "Bearer token-a",
        ["Content-Type"] = "application/json",
        ["Idempotency-Key"] = string.format('"wrk-%s-%d-%d"', tag, tid, key),
    }, nil)
end
EOF
}
{
    echo "-- Every request carries a new key: every request is an execution."
    keyed_lua 1
} >"$work/fresh.lua"
{
    echo "-- A new key every $duplicates requests: one execution, then conflicts and replays."
    keyed_lua "$duplicates"
} >"$work/mix.lua"

# start_server N [BINARY]: a fresh server (this build's, or BINARY) on a free port with an empty
# database; sets $base.
start_server() {
    local out="$work/server-$1.out"
    # The file exists before the server starts, so polling it never reads a missing file.
    : >"$out"
    RUST_LOG=warn "${2:-$server_bin}" --listen 127.0.0.1:0 --db "$work/db-$1.sqlite" \
        >"$out" 2>"$work/server-$1.err" &
    server_pid=$!
    base=""
    for _ in $(seq 1 100); do
        base="$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$out")"
        [ -n "$base" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "the reference server did not start:" >&2
    cat "$work/server-$1.err" >&2
    exit 1
}
# stop_server: stops the server; sets $server_cpu to the CPU seconds it used (user + system).
stop_server() {
    server_cpu="$(awk -v tck="$(getconf CLK_TCK)" '{ print ($14 + $15) / tck }' "/proc/$server_pid/stat")"
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# per_request SECONDS REQUESTS: microseconds per request.
per_request() { python3 -c 'import sys; print(f"{float(sys.argv[1]) / int(sys.argv[2]) * 1e6:.0f}")' "$1" "$2"; }
wrk_requests() { sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$work/wrk-$1.txt"; }

# wrk_rate MODE TAG: requests/s of one wrk run (fails on any non-2xx answer). The replayed key
# is completed first, so wrk's first wave gets replays, not conflicts with a key in flight.
wrk_rate() {
    local out="$work/wrk-$2.txt"
    [ "$1" = replay ] && python3 - "$base" "$2" "$body" <<'PY'
import sys, urllib.request
base, tag, body = sys.argv[1:4]
req = urllib.request.Request(base + "/api/payments", data=body.encode(), method="POST", headers={
    "Authorization": "Bearer token-a", "Content-Type": "application/json",
    "Idempotency-Key": f'"wrk-replay-{tag}"'})
assert urllib.request.urlopen(req, timeout=10).status == 201
PY
    /usr/bin/time -f '%U %S' -o "$work/time-$2.txt" \
        /usr/bin/time -f '%U %S' -o "$work/time-$2.txt" \
        wrk -t2 -c"$concurrency" -d"${seconds}s" -s "$work/$1.lua" "$base/api/payments" -- "$2" >"$out"
    # The mix's duplicates in flight are answered 409; anything else not 2xx is a broken setup.
    if [ "$1" != mix ] && grep -q "Non-2xx" "$out"; then
        echo "wrk $1 got answers other than 2xx:" >&2
        cat "$out" >&2
        exit 1
    fi
    sed -n 's/^Requests\/sec: *\([0-9.]*\)$/\1/p' "$out"
}

# wrk_409_share TAG: the share of a wrk run's answers that were not 2xx (the mix's 409s).
wrk_409_share() {
    python3 - "$work/wrk-$1.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
total = int(re.search(r"(\d+) requests in", text).group(1))
other = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(f"{(int(other.group(1)) if other else 0) / total:.0%}")
PY
}

# stress_run TAG KEYS DURATION [WRAPPER...]: runs stress, checks it passed, prints its JSON
# report's path.
stress_run() {
    local tag="$1" keys="$2" duration="$3"
    shift 3
    local json="$work/stress-$tag.json"
    local extra=()
    [ -n "$rate" ] && extra=(--rate "$rate")
    [ "$http2" = 1 ] && extra+=(--http2)
    "$@" "${binary:-$checker}" stress "$base/api/payments" \
        -H 'Authorization: Bearer token-a' -H 'Content-Type: application/json' \
        -d '{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}' \
        --id-pointer /id --count-url "$base/api/payments/count" \
        --keys "$keys" --duplicates "$duplicates" --concurrency "$concurrency" \
        --duration "$duration" "${extra[@]}" \
        --report-json "$json" --color never >"$work/stress-$tag.txt" 2>"$work/stress-$tag.err" || {
        # A judged run that failed still has its counts to show (--memory prints them).
        if [ -n "${judged:-}" ] && [ -s "$json" ]; then
            echo "$json"
            return 0
        fi
        echo "stress did not pass:" >&2
        cat "$work/stress-$tag.txt" "$work/stress-$tag.err" >&2
        exit 1
    }
    echo "$json"
}

# whole N: N rounded to a whole number, or "-" for a kind left out.
whole() { if [ "$1" = - ]; then echo -; else printf '%.0f' "$1"; fi; }
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "each measurement: ${seconds} s, $concurrency connections / requests in flight, a fresh server"
echo "wrk replay: one key replayed; wrk fresh: a new key per request; wrk mix: a new key every $duplicates requests; stress: --duplicates $duplicates${rate:+ --rate $rate}$([ "$http2" = 1 ] && echo ' --http2')"
printf '%-4s %12s %12s %12s %12s  %s\n' run "wrk replay" "wrk fresh" "wrk mix" stress "409 shares (wrk mix, stress); stress details"
replays=() freshes=() mixes=() stresses=() cpu_lines=() baselines=() client_lines=()
wrk_cpus=() stress_cpus=()
# client_cpu TAG REQUESTS: the client's CPU (user + system, /usr/bin/time) per request, in µs.
client_cpu() {
    tail -n 1 "$work/time-$1.txt" | awk -v n="$2" '{ printf "%.1f\n", ($1 + $2) / n * 1e6 }'
}
# --runs 0 measures memory alone.
for i in $(seq 1 "$runs"); do
    r=- f=- cpu_r=- cpu_f=-
    if [ "$mix_only" = 0 ]; then
        start_server "r$i"; r="$(wrk_rate replay "r$i")"; stop_server
        cpu_r="$(per_request "$server_cpu" "$(wrk_requests "r$i")")"
        start_server "f$i"; f="$(wrk_rate fresh "f$i")"; stop_server
        cpu_f="$(per_request "$server_cpu" "$(wrk_requests "f$i")")"
    fi
    start_server "x$i"; x="$(wrk_rate mix "x$i")"; stop_server
    cpu_x="$(per_request "$server_cpu" "$(wrk_requests "x$i")")"
    client_x="$(client_cpu "x$i" "$(wrk_requests "x$i")")"
    # Enough keys that --duration, not --keys, ends the run.
    start_server "s$i"
    json="$(stress_run "s$i" 10000000 "${seconds}s" /usr/bin/time -f '%U %S' -o "$work/time-s$i.txt")"
    stop_server
    cpu_s="$(per_request "$server_cpu" "$(json_field "$json" requests)")"
    client_s="$(client_cpu "s$i" "$(json_field "$json" requests)")"
    wrk_cpus+=("$client_x") stress_cpus+=("$client_s")
    client_lines+=("$(printf '%-4s %12s %12s %12s' "$i" "$client_x" "$client_s" \
        "$(python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$client_s" "$client_x")")")
    cpu_lines+=("$(printf '%-4s %12s %12s %12s %12s' "$i" "$cpu_r" "$cpu_f" "$cpu_x" "$cpu_s")")
    s="$(json_field "$json" requests_per_second)"
    if [ -n "$baseline" ]; then
        start_server "b$i" "$baseline_server"
        bjson="$(binary="$baseline" stress_run "b$i" 10000000 "${seconds}s" \
            /usr/bin/time -f '%U %S' -o "$work/time-b$i.txt")"
        stop_server
        b="$(json_field "$bjson" requests_per_second)"
        baselines+=("$b")
        printf '%-4s baseline stress %12.0f, its server %s µs per request, itself %s µs per request\n' \
            "$i" "$b" "$(per_request "$server_cpu" "$(json_field "$bjson" requests)")" \
            "$(client_cpu "b$i" "$(json_field "$bjson" requests)")"
    fi
    details="$(python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b = r["bursts"]
released = ", ".join(f"{n} {how}" for how, n in b["released"].items())
conflicts = r["statuses"].get("409", 0) / max(r["requests"], 1)
print(f"{conflicts:.0%}; {r['requests']} requests, {r['keys']} keys, "
      f"{r['violating_keys']} violating, {r.get('connections_opened', 'new')} connections, "
      f"burst spread p50 {b['spread_p50_us']:.0f} us, released {released}")
PY
)"
    printf '%-4s %12s %12s %12s %12s  %s, %s\n' "$i" "$(whole "$r")" "$(whole "$f")" "$(whole "$x")" \
        "$(whole "$s")" "$(wrk_409_share "x$i")" "$details"
    replays+=("$r") freshes+=("$f") mixes+=("$x") stresses+=("$s")
done
[ "$runs" -gt 0 ] && python3 - "${replays[*]}" "${freshes[*]}" "${mixes[*]}" "${stresses[*]}" <<'EOF'
import statistics, sys
def median(a):
    values = [float(x) for x in a.split() if x != "-"]
    return statistics.median(values) if values else None
mr, mf, mx, ms = (median(a) for a in sys.argv[1:5])
show = lambda v: "-" if v is None else f"{v:.0f}"
print(f"median {show(mr):>12} {show(mf):>12} {show(mx):>12} {show(ms):>12}")
print("   ".join(f"stress / wrk {name} = {ms / v:.2f}"
                 for name, v in (("replay", mr), ("fresh", mf), ("mix", mx)) if v))
EOF
if [ -n "$baseline" ] && [ "$runs" -gt 0 ]; then
    python3 - "${baselines[*]}" "${stresses[*]}" <<'EOF'
import statistics, sys
before, after = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:3])
print(f"baseline stress median {before:.0f}; this build / baseline = {after / before:.2f}")
EOF
fi
if [ "$runs" -gt 0 ]; then
    echo
    echo "the client's CPU per request (user + system from /usr/bin/time, µs), the same runs:"
    printf '%-4s %12s %12s %12s\n' run "wrk mix" stress "stress/wrk"
    printf '%s\n' "${client_lines[@]}"
    python3 - "${wrk_cpus[*]}" "${stress_cpus[*]}" "${mixes[*]}" "${stresses[*]}" <<'EOF'
import statistics, sys
wc, sc, wr, sr = ([float(x) for x in a.split()] for a in sys.argv[1:5])
m = statistics.median
print(f"median {m(wc):12.1f} {m(sc):12.1f}")
print(f"goal ratios, medians of {len(wc)}: client CPU per request, stress / wrk mix = "
      f"{m(sc) / m(wc):.2f} (goal at most 2); requests/s, stress / wrk mix = "
      f"{m(sr) / m(wr):.2f} (goal at least 0.8)")
EOF
    echo
    echo "the server's CPU per request (user + system, µs), what each kind of request costs it:"
    printf '%-4s %12s %12s %12s %12s\n' run "wrk replay" "wrk fresh" "wrk mix" stress
    printf '%s\n' "${cpu_lines[@]}"
fi

if [ "$memory" = 1 ]; then
    echo
    echo "peak RSS of idem-check stress (/usr/bin/time -v), --duplicates $duplicates --concurrency $concurrency;"
    echo "every status the server answered, and what its log (RUST_LOG=warn) says went wrong"
    for keys in 20000 200000; do
        start_server "m$keys"
        json="$(judged=1 stress_run "m$keys" "$keys" 1h /usr/bin/time -v -o "$work/time-$keys.txt")"
        stop_server
        rss="$(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$work/time-$keys.txt")"
        printf '%7s keys: %9s requests in %6.1f s, %6.0f requests/s, peak RSS %6.1f MiB\n' \
            "$keys" "$(json_field "$json" requests)" \
            "$(python3 -c 'import sys; print(float(sys.argv[1]) / 1000)' "$(json_field "$json" duration_ms)")" \
            "$(json_field "$json" requests_per_second)" \
            "$(python3 -c 'import sys; print(int(sys.argv[1]) / 1024)' "$rss")"
        python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
statuses = ", ".join(f"{status}×{n}" for status, n in r["statuses"].items())
print(f"       {r['result']['outcome']}: {r['keys_completed']} of {r['keys']} keys completed, "
      f"{r['violating_keys']} violating; statuses {statuses}")
PY
        log="$work/server-m$keys.err"
        printf '       server log: %s warnings, %s errors\n' "$(grep -c ' WARN ' "$log" || true)" \
            "$(grep -c ' ERROR ' "$log" || true)"
        # The causes, once each: what a 503 "storage unavailable" came from.
        { grep -E ' (WARN|ERROR) ' "$log" || true; } | sed 's/^[^ ]* *//' | sort | uniq -c |
            sort -rn | head -n 5 | sed 's/^/       /'
    done
fi
