# Build stage: install everything, compile TypeScript.
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY bin ./bin
COPY migrations ./migrations
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Runtime stage: compiled code and production dependencies, as a non-root user.
FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/migrations ./migrations
RUN mkdir -p /app/.pgsched/output && chown -R node:node /app/.pgsched
USER node
EXPOSE 8080
# The launcher's shebang runs node with the memory settings the processes are tuned for.
ENTRYPOINT ["/app/bin/scheduler"]
CMD ["worker"]
