#!/usr/bin/env bash
# Is the fake payment provider ever the bottleneck of `idem-check stress`?
#
# For each run, two measurements of the same length against a freshly started in-process
# reference server (`stress --reference`, SQLite in a temporary directory):
#
#   plain     `stress --reference`: the server's own request rate, no provider.
#   provider  `stress --reference --provider PROFILE`: the server calls the fake provider for
#             every payment it executes (one provider call per key, in the same process), and
#             stress counts each key's charges at the fake's ledger once the calls settled.
#   fake      `stress` pointed at the fake provider itself (`--provider-listen` on a free port,
#             the target its charge endpoint): every request a provider call, the bursts of
#             duplicates its in-flight and replay rules. The fake's own request rate under the
#             same load, next to the server's (plain).
#
# It prints each run's requests/s, verdict and the provider's calls/s (calls over the run's
# duration, settling included), then the medians, the ratio provider/plain, and the fake's
# median calls/s next to the server's median executions/s (keys completed per second) of the
# plain run, and the fake's own rate over the server's (fake/plain): the fake is not the
# bottleneck when that ratio is at least 1 and every key is charged exactly once.
# Only the generic profile is driven directly (its charge endpoint takes JSON).
#
# Usage: benches/stress_provider.sh [--runs N] [--seconds S] [--profile P] [--concurrency C]
#                                   [--duplicates D] [--no-build] [--checker PATH]
# Without --checker it builds and runs the release binary. Everything runs on 127.0.0.1.
set -euo pipefail

runs=5
seconds=5
profile=generic
concurrency=64
duplicates=8
build=1
checker=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --duplicates) duplicates="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --checker) checker="$2"; build=0; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
if [ -z "$checker" ]; then
  [ "$build" = 1 ] && cargo build --release -p idem-check
  checker=target/release/idem-check
fi
command -v jq >/dev/null || { echo "needs jq (apt-get install jq)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "checker: $checker; $seconds s per measurement, --concurrency $concurrency --duplicates $duplicates, profile $profile"

common=(--keys 1000000 --duration "${seconds}s" --concurrency "$concurrency" --duplicates "$duplicates")
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

printf '%4s  %12s  %8s  %12s  %8s  %16s  %10s  %8s  %s\n' run "plain req/s" verdict "prov. req/s" verdict "provider calls/s" "fake req/s" verdict "keys charged once / more / never"
for i in $(seq 1 "$runs"); do
  "$checker" stress --reference "${common[@]}" --report-json "$work/plain-$i.json" >/dev/null 2>&1 || true
  "$checker" stress --reference --provider "$profile" "${common[@]}" --report-json "$work/prov-$i.json" >/dev/null 2>&1 || true
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$checker" stress "http://127.0.0.1:$port/charges" -X POST -H 'Content-Type: application/json' \
    -d '{"amount":1250,"currency":"EUR","reference":"{{unique}}"}' --id-pointer /id \
    --provider-listen "127.0.0.1:$port" --provider generic "${common[@]}" \
    --report-json "$work/fake-$i.json" >/dev/null 2>&1 || true
  fake=$(jq -r '.requests_per_second' "$work/fake-$i.json")
  fake_v=$(jq -r '.result.outcome' "$work/fake-$i.json")
  echo "$fake" >>"$work/fake"
  plain=$(jq -r '.requests_per_second' "$work/plain-$i.json")
  plain_v=$(jq -r '.result.outcome' "$work/plain-$i.json")
  prov=$(jq -r '.requests_per_second' "$work/prov-$i.json")
  prov_v=$(jq -r '.result.outcome' "$work/prov-$i.json")
  calls=$(jq -r '.provider.calls / (.duration_ms / 1000)' "$work/prov-$i.json")
  charged=$(jq -r '"\(.provider.keys_charged_once) / \(.provider.keys_charged_more) / \(.provider.keys_never_charged)"' "$work/prov-$i.json")
  jq -r '.keys_completed / (.duration_ms / 1000)' "$work/plain-$i.json" >>"$work/executions"
  echo "$plain" >>"$work/plain"
  echo "$prov" >>"$work/prov"
  echo "$calls" >>"$work/calls"
  printf '%4s  %12.0f  %8s  %12.0f  %8s  %16.0f  %10.0f  %8s  %s\n' "$i" "$plain" "$plain_v" "$prov" "$prov_v" "$calls" "$fake" "$fake_v" "$charged"
done
m_plain=$(median <"$work/plain")
m_prov=$(median <"$work/prov")
m_calls=$(median <"$work/calls")
m_exec=$(median <"$work/executions")
m_fake=$(median <"$work/fake")
printf 'median  plain %.0f req/s, provider %.0f req/s: ratio provider/plain %.2f\n' "$m_plain" "$m_prov" "$(echo "$m_prov / $m_plain" | bc -l)"
printf 'median  fake provider %.0f calls/s; the plain server executed %.0f keys/s (ratio %.2f)\n' "$m_calls" "$m_exec" "$(echo "$m_calls / $m_exec" | bc -l)"
printf 'median  the fake alone %.0f req/s: ratio fake/plain %.2f\n' "$m_fake" "$(echo "$m_fake / $m_plain" | bc -l)"
