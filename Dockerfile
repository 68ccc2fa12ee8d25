# syntax=docker/dockerfile:1
# Each `npm ci` below is its own layer keyed on package.json and package-lock.json only: a change
# to the sources rebuilds from `COPY src` on and reuses the installed packages.
# --ignore-scripts: no production dependency has an install script (only dev-only ones do, which
# the build does not need), and the package's own `prepare` (tsc) needs sources not copied yet.

# Production dependencies: what the image ships in node_modules.
FROM node:20-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# Build: every dependency (TypeScript, esbuild), then the sources, compiled to dist/, and the
# dashboard (ui/) bundled into dist/ui.
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npx tsc -p tsconfig.json
COPY scripts/build-ui.mjs ./scripts/build-ui.mjs
COPY ui ./ui
RUN node scripts/build-ui.mjs

# Runtime: production dependencies and compiled code, as a non-root user.
# Handler modules (--handlers) can import Node's built-ins, "pgsched" itself and what pgsched
# depends on, nothing else; for their own dependencies build an image FROM this one (README, Docker).
FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY bin ./bin
COPY migrations ./migrations
COPY docker/healthcheck.mjs ./docker/healthcheck.mjs
COPY --from=build /app/dist ./dist
RUN mkdir -p /app/.pgsched/output && chown -R node:node /app/.pgsched
USER node
EXPOSE 8080
# `api` containers: GET /healthz answers 200; other commands serve no HTTP and report healthy while
# they run. The start period covers an API still waiting for its database at start-up.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["node", "/app/docker/healthcheck.mjs"]
# The launcher's shebang runs node with the memory settings the processes are tuned for.
ENTRYPOINT ["/app/bin/scheduler"]
CMD ["worker"]
