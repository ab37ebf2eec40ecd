#!/usr/bin/env bash
# Runs the gateway image as the Kubernetes manifests run it (deploy/kubernetes/overlays/with-redis,
# rendered with `kubectl kustomize`): the same gateway.yaml from the ConfigMap, the same environment
# from the Secret, the pod's user, a read-only root filesystem with the emptyDir mounts writable, no
# capabilities, no privilege escalation, the memory limit, and its Redis under the Service's name.
# Then checks that the probes answer as the kubelet expects: readiness 200, 503 while Redis is down
# and 200 again after, liveness 200 throughout, and SIGTERM ends it with 0 within the grace period.
# Needs a running Docker engine (scripts/docker-test-env.sh) and the image (GATEWAY_IMAGE, built by
# scripts/docker-image-check.sh; built here if absent). Without kubectl it says so loudly and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${GATEWAY_IMAGE:-oauth-gateway:ci}
REDIS_IMAGE=${REDIS_TEST_IMAGE:-gateway-test/redis:7}
BASE=${NODE_BASE_IMAGE:-gateway-test/node:$(node -p 'process.versions.node.split(".")[0]')}

fail() { echo "kubernetes docker check FAILED: $*" >&2; exit 1; }

if ! command -v kubectl >/dev/null 2>&1; then
  echo "!!! NO kubectl: the Kubernetes manifests were not rendered nor run under Docker. !!!"
  exit 0
fi
if ! docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "building $TAG from the Dockerfile with NODE_IMAGE=$BASE"
  docker build -q --network host --build-arg NODE_IMAGE="$BASE" -t "$TAG" . >/dev/null
fi

work=$(mktemp -d)
net="gwk8s$$"
cleanup() {
  docker rm -f "$net-gateway" "$net-redis" >/dev/null 2>&1 || true
  docker network rm "$net" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

kubectl kustomize deploy/kubernetes/overlays/with-redis >"$work/rendered.yaml"
node scripts/k8s-pod-env.mjs "$work/rendered.yaml" "$work"
chmod 755 "$work" "$work/config" && chmod 644 "$work"/config/*
spec() { node -p "const s = require('$work/spec.json'); $1"; }

# The placeholders in secrets.env and the overlay's Redis password are refused by the gateway (by
# design); an operator replaces them, and so does this check, with random values of the same kind:
# one Redis password in REDIS_URL and in the Redis container's $(REDIS_PASSWORD), as Kubernetes
# expands it from the same Secret.
secret() { head -c 32 /dev/urandom | base64; }
redis_password=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
sed -i -e "s|^GATEWAY_SESSION_SECRET=REPLACE-ME\$|GATEWAY_SESSION_SECRET=$(secret)|" \
  -e "s|^OIDC_CLIENT_SECRET=REPLACE-ME\$|OIDC_CLIENT_SECRET=$(secret)|" \
  -e "s|^REDIS_URL=redis://:REPLACE-ME@|REDIS_URL=redis://:$redis_password@|" "$work/env"
grep -q REPLACE-ME "$work/env" && fail "a placeholder the overlay should have set is left: $(grep REPLACE-ME "$work/env" | cut -d= -f1)"

docker network create "$net" >/dev/null

# Redis as the overlay runs it, under its Service's name (the local image stands in for redis:7).
redis_run() {
  local user; user=$(spec 's.redis.user')
  local args=(--user "$user" --read-only --cap-drop ALL --security-opt no-new-privileges)
  for dir in $(spec "s.redis.writable.join(' ')"); do args+=(--tmpfs "$dir:uid=${user%%:*},mode=0700"); done
  mapfile -t redis_args < <(spec "s.redis.args.join('\n')" | sed "s|\$(REDIS_PASSWORD)|$redis_password|")
  [[ " ${redis_args[*]} " == *" --requirepass $redis_password "* ]] || fail "the overlay's Redis does not ask for REDIS_PASSWORD"
  [ "$(spec "s.redis.env?.find((e) => e.name === 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef?.key ?? ''")" = REDIS_PASSWORD ] || fail "the overlay's Redis does not take REDIS_PASSWORD from the Secret"
  docker run -d --name "$net-redis" --network "$net" --network-alias "$(spec 's.redis.serviceName')" "${args[@]}" "$REDIS_IMAGE" "${redis_args[@]}" >/dev/null
}
redis_run

gw=(--user "$(spec 's.user')" --cap-drop ALL)
[ "$(spec 's.readOnlyRootFilesystem')" = true ] && gw+=(--read-only)
[ "$(spec 's.noNewPrivileges')" = true ] && gw+=(--security-opt no-new-privileges)
[ "$(spec 's.dropAll')" = true ] || fail "the manifest does not drop all capabilities"
for dir in $(spec "s.writable.join(' ')"); do gw+=(--tmpfs "$dir"); done
memory=$(spec 's.memoryLimit ?? ""'); [ -n "$memory" ] && gw+=(--memory "$(echo "$memory" | sed -e 's/Mi$/m/' -e 's/Gi$/g/')")
# Provider discovery goes to the container's own loopback: nothing leaves this machine.
for host in $(spec "s.providerHosts.join(' ')"); do gw+=(--add-host "$host:127.0.0.1"); done
port=$(spec 's.port')
[ "$(spec 's.livenessPort')" = "$port" ] || fail "liveness and readiness probe different ports"
ready=$(spec 's.readinessPath'); live=$(spec 's.livenessPath')
docker run -d --name "$net-gateway" --network "$net" -p "127.0.0.1::$port" "${gw[@]}" \
  -v "$work/config:$(spec 's.configDir'):ro" --env-file "$work/env" "$TAG" >/dev/null
host_port=$(docker port "$net-gateway" "$port" | head -1 | sed 's/.*://')
echo "running $TAG as the with-redis overlay's pod (user $(spec 's.user'), read-only root, probes on 127.0.0.1:$host_port)"

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$host_port$1" || true; }
wait_code() { # path, expected status, tries of 0.2 s
  for _ in $(seq "$3"); do [ "$(code "$1")" = "$2" ] && return 0; sleep 0.2; done
  docker logs --tail 20 "$net-gateway" >&2 || true
  fail "$1 did not answer $2 (last: $(code "$1"))"
}

wait_code "$live" 200 100
echo "ok: liveness $live answers 200"
wait_code "$ready" 200 50
echo "ok: readiness $ready answers 200 with Redis up"
docker exec "$net-gateway" sh -c 'touch /etc/gateway/x 2>/dev/null || touch "$HOME/x" 2>/dev/null' && fail "the root filesystem or the config is writable"
echo "ok: the root filesystem and the mounted config are read-only for the gateway"

docker stop -t 1 "$net-redis" >/dev/null
wait_code "$ready" 503 25
[ "$(code "$live")" = 200 ] || fail "liveness failed while only Redis was down (the pod would be restarted for it)"
echo "ok: readiness $ready answers 503 while Redis is down, liveness stays 200"
docker rm -f "$net-redis" >/dev/null && redis_run
wait_code "$ready" 200 100
echo "ok: readiness $ready answers 200 again once Redis is back"

grace=$(spec 's.terminationGracePeriodSeconds')
start=$(date +%s)
docker stop -t "$grace" "$net-gateway" >/dev/null
elapsed=$(( $(date +%s) - start ))
status=$(docker inspect -f '{{.State.ExitCode}}' "$net-gateway")
[ "$status" = 0 ] || { docker logs --tail 20 "$net-gateway" >&2; fail "SIGTERM ended the gateway with status $status"; }
docker logs "$net-gateway" 2>&1 | grep -q '"msg":"shut down"' || fail "no 'shut down' in the gateway's log"
echo "ok: SIGTERM ends the gateway with 0 in ${elapsed}s (grace period ${grace}s, preStop $(spec 's.preStopSeconds')s)"
echo "kubernetes docker check passed"
