# Baton's image: the CLI and every host (`baton executor`, `baton worker`, ...).
# Sources run through tsx, so the build stage only installs production dependencies.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only; install scripts are needed for esbuild (tsx).
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY actors ./actors
COPY schemas ./schemas
COPY projections ./projections
COPY examples ./examples
USER node
ENTRYPOINT ["node", "bin/baton.js"]
CMD ["--help"]
