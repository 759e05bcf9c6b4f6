#!/usr/bin/env bash
# The Dray quickstart: builds Dray, starts `dray serve` with the example project applied,
# and prints the URL it serves at. With --smoke it checks the pipeline is there and exits.
#
# Today this starts the server with the dev -> staging -> prod project; discovery,
# promotions and the web UI arrive with their issues (see docs/architecture.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
smoke=false
for arg in "$@"; do
  case "$arg" in
    --smoke) smoke=true ;;
    -h|--help) echo "usage: $0 [--smoke]"; exit 0 ;;
    *) echo "error: unknown argument \`$arg\`" >&2; echo "hint: run $0 --help" >&2; exit 2 ;;
  esac
done

command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust from your package manager or rustup" >&2; exit 1; }
echo "==> building dray"
(cd "$root" && cargo build --quiet --bin dray)
dray="$root/target/debug/dray"

work="$(mktemp -d "${TMPDIR:-/tmp}/dray-quickstart.XXXXXX")"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 7070)"
url="http://127.0.0.1:$port"
export DRAY_SERVER="$url"

echo "==> starting dray serve (data in $work)"
"$dray" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
  --config "$here/project" >"$work/dray.log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap cleanup EXIT

for _ in $(seq 1 100); do
  if curl -fsS "$url/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server" 2>/dev/null; then
    echo "error: dray serve exited; its log:" >&2; cat "$work/dray.log" >&2; exit 1
  fi
  sleep 0.1
done
curl -fsS "$url/healthz" >/dev/null || { echo "error: dray serve did not answer /healthz within 10s; log: $work/dray.log" >&2; exit 1; }

"$dray" get stages -p demo
if $smoke; then
  count="$("$dray" get stages -p demo -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
  [ "$count" = 3 ] || { echo "error: expected 3 stages, found $count" >&2; exit 1; }
  echo "smoke: ok"
  exit 0
fi
echo
echo "Dray is serving at $url  (export DRAY_SERVER=$url; try: $dray get stages -p demo)"
echo "Press Ctrl-C to stop."
wait "$server"
