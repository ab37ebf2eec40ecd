#!/usr/bin/env bash
# Builds the project's Dockerfile against a local Node base image (no registry needed; see
# docker-test-env.sh), runs the image, and checks it: /healthz answers, HEALTHCHECK turns healthy,
# it runs an LTS release of Node, `--check` passes on the shipped config inside it, it runs as a
# non-root user, and the final image holds production dependencies only and no package manager. Exits non-zero on the
# first failed check.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${NODE_BASE_IMAGE:-gateway-test/node:$(node -p 'process.versions.node.split(".")[0]')}
TAG=${GATEWAY_IMAGE:-oauth-gateway:ci}

fail() { echo "docker image check FAILED: $*" >&2; exit 1; }

echo "building $TAG from the Dockerfile with NODE_IMAGE=$BASE"
docker build -q --network host --build-arg NODE_IMAGE="$BASE" -t "$TAG" . >/dev/null

cid=$(docker run -d -p 127.0.0.1::8080 -e GATEWAY_SESSION_SECRET=docker-check-secret-0123456789abcdef "$TAG")
trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
port=$(docker port "$cid" 8080 | head -1 | sed 's/.*://')

for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
[ "$(curl -fsS "http://127.0.0.1:$port/healthz")" = '{"status":"ok"}' ] || fail "/healthz did not answer on port $port"
echo "ok: /healthz answers through the published port"

status=''
for _ in $(seq 40); do
  status=$(docker inspect -f '{{.State.Health.Status}}' "$cid")
  [ "$status" = healthy ] && break
  sleep 1
done
[ "$status" = healthy ] || fail "HEALTHCHECK status is '$status'"
echo "ok: HEALTHCHECK reports healthy"

runtime=$(docker run --rm "$TAG" node -p 'process.version + " " + (process.release.lts ?? "")')
[ -n "${runtime#* }" ] || fail "the image's Node ${runtime% *} is not an LTS release"
echo "ok: the image runs Node ${runtime% *} (LTS ${runtime#* })"

docker run --rm "$TAG" node dist/src/main.js --check || fail "--check on the shipped config"
echo "ok: --check passes on /etc/gateway/gateway.yaml inside the image"

user=$(docker inspect -f '{{.Config.User}}' "$TAG")
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "the image runs as '$user'"
[ "$(docker run --rm "$TAG" id -u)" != 0 ] || fail "the process runs as root"
echo "ok: runs as user '$user'"

# By path: npm prune leaves a scoped package's emptied scope folder behind.
dev=$(docker run --rm "$TAG" sh -c 'for package in vitest typescript testcontainers eslint playwright-core @modelcontextprotocol/sdk; do [ -e "node_modules/$package" ] && echo "$package"; done; true')
[ -z "$dev" ] || fail "dev dependencies in the final image: $dev"
echo "ok: production dependencies only"

managers=$(docker run --rm "$TAG" sh -c 'for tool in npm npx corepack yarn yarnpkg; do command -v "$tool"; done; true')
[ -z "$managers" ] || fail "package managers in the final image: $managers"
echo "ok: no package manager"
echo "docker image check passed ($TAG, $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
