#!/usr/bin/env bash
# The promotion baseline of Dray's benchmark (issue 4): what teams write today to promote
# an image to dev. A full `git clone` of the config repository, pin the image in the dev
# overlay with `sed` (what `kustomize edit set image` does), render it with
# `kubectl kustomize`, commit on a branch and push it.
#
# usage: baseline-promote.sh REPO_URL IMAGE DIGEST BRANCH
#
# Run by e2e/src/bin/bench.rs, which sets HOME and the git author. The branch is
# force-pushed: every run starts from a fresh clone of `main`.
set -euo pipefail

repo_url="$1"
image="$2"
digest="$3"
branch="$4"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

git clone --quiet "$repo_url" "$work/config"
cd "$work/config"
git checkout --quiet -B "$branch"

kustomization=overlays/dev/kustomization.yaml
sed -i '/^images:/,$d' "$kustomization"
printf 'images:\n  - name: %s\n    digest: %s\n' "$image" "$digest" >>"$kustomization"

mkdir -p rendered/dev
kubectl kustomize overlays/dev >rendered/dev/manifests.yaml

git add --all
git commit --quiet -m "Promote $image@$digest to dev"
git push --quiet --force origin "$branch"
