# Baton's image: the CLI and every host (`baton executor`, `baton worker`, `baton projector`,
# `baton api`, `baton eventstore copy`, ...). bin/baton.js runs the compiled JavaScript in dist/,
# built in the `build` stage; tsx stays a runtime dependency (package.json) for `--actions` and
# `--against` modules written in TypeScript, and for running the sources should dist/ be missing.
#
#   docker build -t baton:local .                    # the image docker-compose.yml runs
#   docker build --target typecheck .                # optional: type-check the sources in a container
#
# Stages: base (Node and the work dir), build (every dependency; `npm run build` compiles to
# dist/), typecheck (the build plus the tests and tsc; only built when targeted), runtime
# (production dependencies, the sources and dist/, run as the unprivileged `node` user).

FROM node:20-bookworm-slim AS base
WORKDIR /app
ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

FROM base AS build
COPY package.json package-lock.json ./
# No install scripts: `prepare` (the build) needs the sources, which come next.
RUN npm ci --include=dev --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY scripts ./scripts
COPY src ./src
COPY actors ./actors
COPY schemas ./schemas
COPY projections ./projections
RUN npm run build

FROM build AS typecheck
COPY vitest.config.ts ./
COPY examples ./examples
COPY test ./test
RUN npx tsc --noEmit -p .

FROM base AS runtime
COPY package.json package-lock.json ./
COPY bin ./bin
COPY scripts ./scripts
# Production dependencies only. Install scripts stay on: esbuild (under tsx) checks its binary;
# `prepare` finds no TypeScript compiler here and leaves the build to the `build` stage.
RUN npm ci --omit=dev && npm cache clean --force
COPY src ./src
COPY actors ./actors
COPY schemas ./schemas
COPY projections ./projections
COPY examples ./examples
# After the sources: bin/baton.js runs dist/ only while no source is newer than its build.
COPY --from=build /app/dist ./dist
# The sources stay root-owned and read-only to the process; only BATON_DATA_DIR (./.baton: copy
# checkpoints, the embedded Postgres of `baton dev`) is the node user's.
RUN mkdir -p /app/.baton && chown node:node /app/.baton
# A larger young generation for the hosts: their garbage is short-lived (events, snapshots, rows);
# garbage collection took 12% of a `baton bench` process's CPU with the default, 6% with 64 MB.
ENV NODE_OPTIONS=--max-semi-space-size=64
USER node
ENTRYPOINT ["node", "bin/baton.js"]
CMD ["--help"]
