#!/usr/bin/env bash
# The Dray quickstart: a local OCI registry, a config repository and the dev -> staging ->
# prod pipeline, all on loopback. Prints the URL Dray serves at once `dev` holds the
# newest Freight. `--smoke` goes on to prod without a person and exits 0 only when
# `stage/prod` holds the expected digest (the test suite runs it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
for arg in "$@"; do
  case "$arg" in
    --smoke) ;;
    -h|--help) echo "usage: $0 [--smoke]"; exit 0 ;;
    *) echo "error: unknown argument \`$arg\`" >&2; echo "hint: run $0 --help" >&2; exit 2 ;;
  esac
done

command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust first (rustup.rs or your package manager)" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

echo "==> building dray"
(cd "$root" && cargo build --quiet --bin dray -p dray && cargo build --quiet --bin quickstart -p dray-e2e)
export DRAY_BIN="$root/target/debug/dray"
exec "$root/target/debug/quickstart" "$@"
