#!/usr/bin/env bash
# Dray's test command (what CI runs): install the real services the end-to-end tests
# use when missing, then build, test, lint and check formatting of the whole workspace.
# Works from any directory; idempotent (skips what is already installed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ ! -t 1 ]; then
  export CARGO_TERM_COLOR=never
fi

# --- system packages -------------------------------------------------------------------
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)
# git signs Dray's commits with SSH keys (`gpg.format=ssh`) through ssh-keygen.
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
# the deploy tests check the chart's generated webhook certificate with `openssl verify`
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Browser tests of the web UI (e2e/src/browser.rs) drive Debian's Chromium through ChromeDriver;
# fonts-liberation (otherwise only a recommendation) gives screenshots readable text.
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-liberation)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if command -v git >/dev/null 2>&1 && [ ! -x "$(git --exec-path)/git-http-backend" ]; then
  missing+=(git)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- real tools from their Go modules --------------------------------------------------
# kube-apiserver, kube-controller-manager, kubectl and etcd of one Kubernetes release, Helm
# v4, kustomize v5 and cosign, at the versions in e2e/tools/versions.env, built once into a
# cache (~/.cache/dray-e2e/tools) and put first on PATH, so every `kubectl`, `helm` and
# `kustomize` the tests and the `dray` they start run is the pinned one.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
tool_dirs="$(bash e2e/tools/build.sh --print-path)"
PATH="$(printf '%s' "$tool_dirs" | paste -sd: -):$PATH"
export PATH
# kustomize-build runs the standalone kustomize, as Argo CD does.
DRAY_KUSTOMIZE="$(command -v kustomize)"
export DRAY_KUSTOMIZE
echo "test.sh: git $(git --version | cut -d' ' -f3) ($(command -v git)), $(kubectl version --client 2>/dev/null | head -1)," \
  "kustomize $(kustomize version 2>/dev/null), helm $(helm version --short 2>/dev/null)," \
  "$(cosign version 2>/dev/null | sed -n 's/^GitVersion:[[:space:]]*/cosign /p')" >&2

# A real OpenID provider for the OIDC login tests (e2e/src/oidc_provider.rs).
if ! python3 -c 'import oidc_provider_mock' 2>/dev/null; then
  python3 -m pip install -q oidc-provider-mock 2>/dev/null \
    || python3 -m pip install -q --break-system-packages oidc-provider-mock
fi

# --- build and test --------------------------------------------------------------------
# The e2e tests start the binary built here.
export DRAY_BIN="$ROOT/target/debug/dray"
# Two cores: bound the parallel tests, each of which starts real services.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"

cargo build --workspace --all-targets
cargo test --workspace --all-targets

# Lints and formatting are part of the test: install them when missing, never skip them.
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    echo "test.sh: installing clippy and rustfmt" >&2
    rustup component add clippy rustfmt
  else
    echo "test.sh: clippy or rustfmt is missing and there is no rustup to add them;" \
      "install your toolchain's clippy and rustfmt" >&2
    exit 1
  fi
fi
cargo clippy --workspace --all-targets -- -D warnings
cargo fmt --all -- --check
