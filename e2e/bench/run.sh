#!/usr/bin/env bash
# Dray's benchmarks (issues 3, 4 and 8, KARGO-LESSONS 25): discovery against skopeo,
# promotion against a clone-sed-commit-push script, the UI page of a 1,000-Stage project
# against the JSON list of its Stages, a CI webhook to a pushed dev promotion against the
# same script, and (issue 13) the controllers of one server with a small project alone and
# beside a 1,000-Stage one, and (issue 15) git discovery on a deep repository against
# `git clone` + `git log`, and (issue 33) the quickstart's webhook to a pushed dev promotion in
# Kubernetes mode on a real control plane against embedded mode. Builds Dray in release
# mode, runs e2e/src/bin/bench.rs, e2e/src/bin/bench_ui.rs, e2e/src/bin/bench_webhook.rs,
# e2e/src/bin/bench_controllers/, e2e/src/bin/bench_git.rs and e2e/src/bin/bench_kube.rs
# and writes their results into docs/benchmarks.md (between the `bench:*` markers).
#
# Not a test and not run by CI. Takes a few minutes; needs no network beyond loopback
# (except to install missing Debian packages).
#
# usage: e2e/bench/run.sh [--only discovery|promotion|ui|webhook|controllers|git|kubernetes] [--runs N]
#                         [--tags N] [--commits N] [--files N]
#                         [--stages N] [--freight N] [--requests N] [--page-path PATH] [--board-path PATH]
#                         [--idle-seconds N] [--git-commits N]
#
# --runs goes to every part but ui; --stages to ui and controllers. The controller part
# also reads DRAY_BENCH_RUNS, DRAY_BENCH_STAGES and DRAY_BENCH_IDLE_SECONDS (the flags win).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

# --- arguments: which parts, and which flags go to which binary ----------------------
bench_args=()
ui_args=()
webhook_args=()
kube_args=()
controllers_args=()
git_args=()
run_git=1
run_bench=1
run_ui=1
run_webhook=1
run_controllers=1
run_kube=1
while [ "$#" -gt 0 ]; do
  case "$1" in
    --only)
      [ "$#" -ge 2 ] || { echo "error: --only needs discovery, promotion, ui, webhook, controllers, git or kubernetes" >&2; exit 2; }
      case "$2" in
        ui) run_bench=0; run_webhook=0; run_controllers=0; run_git=0; run_kube=0 ;;
        webhook) run_bench=0; run_ui=0; run_controllers=0; run_git=0; run_kube=0 ;;
        controllers) run_bench=0; run_ui=0; run_webhook=0; run_git=0; run_kube=0 ;;
        git) run_bench=0; run_ui=0; run_webhook=0; run_controllers=0; run_kube=0 ;;
        kubernetes) run_bench=0; run_ui=0; run_webhook=0; run_controllers=0; run_git=0 ;;
        discovery | promotion) run_ui=0; run_webhook=0; run_controllers=0; run_git=0; run_kube=0; bench_args+=(--only "$2") ;;
        *) echo "error: --only takes discovery, promotion, ui, webhook, controllers, git or kubernetes, not '$2'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --runs)
      [ "$#" -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      bench_args+=("$1" "$2"); webhook_args+=("$1" "$2"); controllers_args+=("$1" "$2"); kube_args+=("$1" "$2"); shift 2 ;;
    --stages)
      [ "$#" -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      ui_args+=("$1" "$2"); controllers_args+=("$1" "$2"); shift 2 ;;
    --git-commits)
      [ "$#" -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      git_args+=(--commits "$2"); shift 2 ;;
    --idle-seconds)
      [ "$#" -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      controllers_args+=("$1" "$2"); shift 2 ;;
    --freight | --requests | --page-path | --board-path)
      [ "$#" -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      ui_args+=("$1" "$2"); shift 2 ;;
    *)
      bench_args+=("$1"); shift ;;
  esac
done

if [ ! -t 1 ]; then
  export CARGO_TERM_COLOR=never
fi

# --- system packages (as e2e/test.sh) ------------------------------------------------
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v git >/dev/null 2>&1 || missing+=(git)
if command -v git >/dev/null 2>&1 && [ ! -x "$(git --exec-path)/git-http-backend" ]; then
  missing+=(git)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bench: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if ! command -v kubectl >/dev/null 2>&1; then
  echo "error: kubectl is missing (the quickstart task and the baseline script render with \`kubectl kustomize\`)" >&2
  echo "hint: install kubectl 1.32 (it carries kustomize v5.5)" >&2
  exit 1
fi

# --- build and run -------------------------------------------------------------------
cargo build --release -p dray -p dray-e2e
export DRAY_BIN="$ROOT/target/release/dray"

out="$(mktemp -d "${TMPDIR:-/tmp}/dray-bench.XXXXXX")"
trap 'rm -rf "$out"' EXIT
load="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
status=0
if [ "$run_bench" -eq 1 ]; then
  "$ROOT/target/release/bench" --out-dir "$out" "${bench_args[@]}" || status=$?
fi
if [ "$run_ui" -eq 1 ]; then
  "$ROOT/target/release/bench_ui" --out-dir "$out" "${ui_args[@]}" || status=$?
fi
if [ "$run_webhook" -eq 1 ]; then
  "$ROOT/target/release/bench_webhook" --out-dir "$out" "${webhook_args[@]}" || status=$?
fi
if [ "$run_controllers" -eq 1 ]; then
  "$ROOT/target/release/bench_controllers" --out-dir "$out" "${controllers_args[@]}" || status=$?
fi
if [ "$run_git" -eq 1 ]; then
  "$ROOT/target/release/bench_git" --out-dir "$out" "${git_args[@]}" || status=$?
fi
if [ "$run_kube" -eq 1 ]; then
  # The control plane, helm and kustomize the tests pin, built once (e2e/tools/build.sh).
  PATH="$(bash "$ROOT/e2e/tools/build.sh" --print-path kubernetes | paste -sd: -):$PATH" \
    "$ROOT/target/release/bench_kube" --out-dir "$out" "${kube_args[@]}" || status=$?
fi

# --- docs/benchmarks.md --------------------------------------------------------------
cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain 2>/dev/null | head -1)" ]; then
  commit="$commit with local changes"
fi
machine="$(nproc) CPUs (${cpu:-unknown CPU}), $(uname -sr)"
tools="git $(git --version | awk '{print $3}'), skopeo $(skopeo --version | awk '{print $3}'), $(kubectl version --client 2>/dev/null | awk -F': ' '/Kustomize/ {print "kustomize " $2}')"
header="_Measured $(date -u +%Y-%m-%d) on $machine, load average $load when the run started; Dray at \`$commit\`, release build; $tools._"

doc="$ROOT/docs/benchmarks.md"
for part in discovery promotion ui webhook controllers git kubernetes; do
  [ -s "$out/$part.md" ] || continue
  python3 - "$doc" "$part" "$header" "$out/$part.md" <<'PY'
import pathlib, sys
doc, part, header, result = sys.argv[1:]
path = pathlib.Path(doc)
begin = f"<!-- bench:{part}:begin (written by e2e/bench/run.sh) -->"
end = f"<!-- bench:{part}:end -->"
block = f"{begin}\n{pathlib.Path(result).read_text().rstrip()}\n\n{header}\n{end}"
text = path.read_text() if path.exists() else "# Benchmarks\n\nRun `e2e/bench/run.sh`.\n"
if begin in text and end in text:
    before, rest = text.split(begin, 1)
    _, after = rest.split(end, 1)
    text = before + block + after
else:
    text = text.rstrip() + "\n\n" + block + "\n"
path.write_text(text)
PY
  echo "bench: wrote the $part results to docs/benchmarks.md" >&2
done
exit "$status"
