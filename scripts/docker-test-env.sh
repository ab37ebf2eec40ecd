#!/usr/bin/env bash
# Starts a local Docker engine and builds, without any image registry, the Redis test image (for the
# tests' testcontainers path) and a Node base image (to build the project's Dockerfile against). Usage: bash scripts/docker-test-env.sh [start|stop]
# The base image holds the Node binary GATEWAY_NODE (default: the `node` on PATH; CI passes the LTS
# binary it downloaded from the npm registry) and is tagged gateway-test/node:<its major version>.
# Prints what it did; exits non-zero (and says why) when the engine cannot be started.
set -euo pipefail
IMAGE=${REDIS_TEST_IMAGE:-gateway-test/redis:7}
GATEWAY_NODE=$(readlink -f "${GATEWAY_NODE:-$(command -v node)}")
NODE_IMAGE=${NODE_BASE_IMAGE:-gateway-test/node:$("$GATEWAY_NODE" -p 'process.versions.node.split(".")[0]')}
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
# As the official image: `redis-server ARGS` or just ARGS; accept connections from the bridge network.
[ "${1:-}" = redis-server ] && shift
exec /usr/bin/redis-server --protected-mode no --save "" --appendonly no --dir /data "$@"
SH
  chmod +x "$work/rootfs/usr/bin/docker-entrypoint"
  tar -C "$work/rootfs" -c . | docker import -c 'ENTRYPOINT ["/usr/bin/docker-entrypoint"]' -c 'EXPOSE 6379' - "$IMAGE" >/dev/null
  rm -rf "$work"
  echo "image $IMAGE built from Debian packages"
}

# A Node base image from GATEWAY_NODE and this machine's npm (npm is plain JavaScript: one copy runs
# on every supported line), with a `node` user (uid 1000) as in the official image, a static busybox
# for RUN steps, and the machine's CA bundle for npm. An image of that tag holding another Node
# version is rebuilt.
build_node_image() {
  local node=$GATEWAY_NODE want; want=$("$node" --version)
  if docker image inspect "$NODE_IMAGE" >/dev/null 2>&1; then
    if [ "$(docker run --rm "$NODE_IMAGE" node --version 2>/dev/null)" = "$want" ]; then echo "image $NODE_IMAGE present (Node $want)"; return; fi
    docker image rm -f "$NODE_IMAGE" >/dev/null
  fi
  local work npm_dir; work=$(mktemp -d)
  npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  mkdir -p "$work/rootfs"/{bin,usr/bin,usr/lib/node_modules,etc/ssl/certs,usr/etc,tmp,home/node,root,lib64}
  chmod 1777 "$work/rootfs/tmp"
  cp "$node" "$work/rootfs/usr/bin/node"
  cp -a "$npm_dir" "$work/rootfs/usr/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/rootfs/usr/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/rootfs/usr/bin/npx"
  apt-get download busybox-static >/dev/null 2>&1 || { apt-get update -qq >/dev/null; apt-get download busybox-static >/dev/null; }
  mv busybox-static_*.deb "$work/" && dpkg -x "$work"/busybox-static_*.deb "$work/x"
  cp "$work/x/bin/busybox" "$work/rootfs/bin/busybox"
  for tool in sh ls cat mkdir rm cp mv ln chmod chown id env wget grep sed sleep; do ln -sf busybox "$work/rootfs/bin/$tool"; done
  ln -sf ../../bin/busybox "$work/rootfs/usr/bin/env"
  ldd "$node" | awk '/=> \//{print $3}' | while read -r lib; do mkdir -p "$work/rootfs$(dirname "$lib")"; cp -L "$lib" "$work/rootfs$lib"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$work/rootfs/lib64/"
  cp -L /etc/ssl/certs/ca-certificates.crt "$work/rootfs/etc/ssl/certs/"
  printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\nfund=false\naudit=false\n' >"$work/rootfs/usr/etc/npmrc"
  printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\n' >"$work/rootfs/etc/passwd"
  printf 'root:x:0:\nnode:x:1000:\n' >"$work/rootfs/etc/group"
  printf 'hosts: files dns\n' >"$work/rootfs/etc/nsswitch.conf"
  chown 1000:1000 "$work/rootfs/home/node"
  tar -C "$work/rootfs" -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'CMD ["node"]' - "$NODE_IMAGE" >/dev/null
  rm -rf "$work"
  echo "image $NODE_IMAGE built from Node $want ($node)"
}

case "${1:-start}" in
  start) start_engine; build_redis_image; build_node_image ;;
  stop) stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
