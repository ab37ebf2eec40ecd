# The gateway image: compiled in a build stage, run from a final stage with production dependencies
# only, as the unprivileged `node` user. Config at /etc/gateway/gateway.yaml (mount your own there);
# secrets come from the environment (GATEWAY_SESSION_SECRET, client secrets through ${VAR} in the
# config). `--target demo` builds the demo's authorization server and sample app instead.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.validators.json ./
COPY src ./src
COPY scripts/compile-validators.ts ./scripts/
COPY demo ./demo
RUN npm run build

# The demo stack's authorization server and sample app (docker-compose.yml); not for production.
FROM build AS demo
ENV DEMO_HOST=0.0.0.0
USER node
EXPOSE 9000 9100
CMD ["node", "dist/demo/run.js", "--without-gateway"]

FROM build AS production-dependencies
RUN npm prune --omit=dev

FROM ${NODE_IMAGE}
# No package manager in the running image (npm, npx, corepack, yarn: the official image's under
# /usr/local, a Debian-style base's under /usr): code that got to run in the process cannot fetch
# and run packages with them.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn \
      /usr/local/bin/yarnpkg /opt/yarn-v* /usr/lib/node_modules/npm /usr/lib/node_modules/corepack /usr/bin/npm /usr/bin/npx
# MALLOC_ARENA_MAX=2: glibc's malloc keeps two arenas instead of one per thread that allocates
# (libuv's pool runs crypto jobs): 11-16 MB less at a sign-in storm's peak (docs/performance.md, "Memory").
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    GATEWAY_CONFIG=/etc/gateway/gateway.yaml \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080
WORKDIR /app
COPY --from=production-dependencies /src/package.json ./
COPY --from=production-dependencies /src/node_modules ./node_modules
COPY --from=production-dependencies /src/dist/src ./dist/src
COPY gateway.yaml /etc/gateway/gateway.yaml
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.GATEWAY_PORT + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# A young generation of at most 8 MB a semi-space and an old generation allowed to grow 20% past
# what survived its last full collection: a sign-in storm's peak under 150 MB, 256 Mi per pod with
# room to spare (docs/performance.md, "Memory").
CMD ["node", "--max-semi-space-size=8", "--heap-growing-percent=20", "dist/src/main.js"]
