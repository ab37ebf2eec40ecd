#!/usr/bin/env bash
# Starts a local Docker engine and builds the Redis test image without any image registry, so the
# tests take their testcontainers path. Usage: bash scripts/docker-test-env.sh [start|stop]
# Prints what it did; exits non-zero (and says why) when the engine cannot be started.
set -euo pipefail
IMAGE=${REDIS_TEST_IMAGE:-gateway-test/redis:7}
STATE=${DOCKER_TEST_STATE:-/tmp/gateway-dockerd}
mkdir -p "$STATE"

stop() {
  if [ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then
    kill "$(cat "$STATE/pid")"
    for _ in $(seq 50); do kill -0 "$(cat "$STATE/pid")" 2>/dev/null || break; sleep 0.1; done
    ip link del docker0 2>/dev/null || true
    echo "docker engine stopped"
  fi
  rm -f "$STATE/pid"
}

start_engine() {
  if docker info >/dev/null 2>&1; then echo "docker engine already answers"; return; fi
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "installing docker.io (Debian's engine)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  # These flags leave the host's firewall rules and sysctls alone; published ports still answer on localhost.
  nohup dockerd --iptables=false --ip-forward=false >"$STATE/dockerd.log" 2>&1 &
  echo $! >"$STATE/pid"
  for _ in $(seq 100); do docker info >/dev/null 2>&1 && { echo "docker engine started (pid $(cat "$STATE/pid"))"; return; }; sleep 0.2; done
  echo "docker engine did not start; see $STATE/dockerd.log" >&2
  tail -5 "$STATE/dockerd.log" >&2 || true
  exit 1
}

# A Redis image from Debian's packages: redis-server, redis-cli, a static busybox for /bin/sh and
# the tools testcontainers' wait strategy runs, bash and env, and the shared libraries they need.
build_redis_image() {
  if docker image inspect "$IMAGE" >/dev/null 2>&1; then echo "image $IMAGE present"; return; fi
  local work; work=$(mktemp -d)
  (cd "$work" && apt-get download redis-server redis-tools libjemalloc2 liblzf1 busybox-static >/dev/null 2>&1) || {
    apt-get update -qq >/dev/null; (cd "$work" && apt-get download redis-server redis-tools libjemalloc2 liblzf1 busybox-static >/dev/null)
  }
  mkdir -p "$work/x" "$work/rootfs"/{bin,usr/bin,data,tmp,etc}
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
  cp "$work/x/usr/bin/redis-check-rdb" "$work/rootfs/usr/bin/redis-server"
  cp "$work/x/usr/bin/redis-cli" "$work/rootfs/usr/bin/"
  cp "$work/x/bin/busybox" "$work/rootfs/bin/busybox"
  for tool in sh cat awk grep nc sed ls sleep; do ln -sf busybox "$work/rootfs/bin/$tool"; done
  cp /bin/bash "$work/rootfs/bin/bash"
  cp /usr/bin/env "$work/rootfs/usr/bin/env"
  for bin in "$work/rootfs/usr/bin/redis-server" "$work/rootfs/usr/bin/redis-cli" /bin/bash /usr/bin/env; do
    LD_LIBRARY_PATH="$work/x/usr/lib/x86_64-linux-gnu" ldd "$bin" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}' | while read -r lib; do
      mkdir -p "$work/rootfs$(dirname "$lib")"; cp -L "$lib" "$work/rootfs$lib"
    done
  done
  # Libraries from the downloaded packages (jemalloc, lzf) where ldd found them.
  mkdir -p "$work/rootfs/usr/lib/x86_64-linux-gnu"
  cp -L "$work"/x/usr/lib/x86_64-linux-gnu/*.so* "$work/rootfs/usr/lib/x86_64-linux-gnu/" 2>/dev/null || true
  mkdir -p "$work/rootfs/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$work/rootfs/lib64/"
  cat >"$work/rootfs/usr/bin/docker-entrypoint" <<'SH'
#!/bin/sh
# As the official image: accept connections from the bridge network.
exec /usr/bin/redis-server --protected-mode no --save "" --appendonly no --dir /data "$@"
SH
  chmod +x "$work/rootfs/usr/bin/docker-entrypoint"
  tar -C "$work/rootfs" -c . | docker import -c 'ENTRYPOINT ["/usr/bin/docker-entrypoint"]' -c 'EXPOSE 6379' - "$IMAGE" >/dev/null
  rm -rf "$work"
  echo "image $IMAGE built from Debian packages"
}

case "${1:-start}" in
  start) start_engine; build_redis_image ;;
  stop) stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
