#!/usr/bin/env bash
# Brings docker-compose.yml up on free loopback ports with locally built base images (no registry
# needed; see docker-test-env.sh), walks a sign-in through it (test/compose/compose.check.ts), and
# takes it down again. Needs a running Docker engine; installs Debian's docker-compose if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-compose >/dev/null 2>&1; then
  echo "installing Debian's docker-compose"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
fi

free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
export NODE_IMAGE=${NODE_BASE_IMAGE:-gateway-test/node:$(node -p 'process.versions.node.split(".")[0]')} REDIS_IMAGE=${REDIS_TEST_IMAGE:-gateway-test/redis:7}
export GATEWAY_PORT; GATEWAY_PORT=$(free_port)
export DEMO_ISSUER_PORT; DEMO_ISSUER_PORT=$(free_port)
project="gwci$$"

down() { docker-compose -p "$project" down -v --remove-orphans >/dev/null 2>&1 || true; }
trap down EXIT

echo "docker-compose up (project $project, gateway on 127.0.0.1:$GATEWAY_PORT, issuer on 127.0.0.1:$DEMO_ISSUER_PORT)"
docker-compose -p "$project" up -d --build >/tmp/"$project"-up.log 2>&1 || { tail -20 /tmp/"$project"-up.log; exit 1; }
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$GATEWAY_PORT/readyz" >/dev/null 2>&1 && break; sleep 0.3; done
curl -fsS "http://127.0.0.1:$GATEWAY_PORT/readyz" >/dev/null || { docker-compose -p "$project" logs --tail 20; exit 1; }

COMPOSE_GATEWAY_URL="http://localhost:$GATEWAY_PORT" COMPOSE_PROJECT="$project" npx vitest run --config vitest.compose.config.ts
