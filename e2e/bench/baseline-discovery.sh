#!/usr/bin/env bash
# The discovery baseline of Dray's benchmark (issue 3): what a team's script does to find
# the newest images of a repository with skopeo. List the tags, keep the strict x.y.z
# versions, take the newest LIMIT, and read each one's digest with `skopeo inspect`,
# one after the other as a shell loop does. Prints `TAG DIGEST` per candidate.
#
# usage: baseline-discovery.sh [--no-tags] HOST:PORT/REPO LIMIT
#   --no-tags   pass `--no-tags` to `skopeo inspect` (by default it lists every tag of
#               the repository again on each call)
#
# Run by e2e/src/bin/bench.rs; plain HTTP loopback registry, no policy.json here.
set -euo pipefail

inspect_args=()
if [ "${1:-}" = --no-tags ]; then
  inspect_args+=(--no-tags)
  shift
fi
repo="$1"
limit="$2"

tags="$(skopeo --insecure-policy list-tags --tls-verify=false "docker://$repo" \
  | jq -r '.Tags[]' \
  | grep -E '^v?[0-9]+\.[0-9]+\.[0-9]+$' \
  | sort -rV \
  | awk -v n="$limit" 'NR <= n')"

while read -r tag; do
  digest="$(skopeo --insecure-policy inspect --tls-verify=false "${inspect_args[@]}" \
    --format '{{.Digest}}' "docker://$repo:$tag")"
  echo "$tag $digest"
done <<<"$tags"
