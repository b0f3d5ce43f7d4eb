# Baton's image: the CLI and every host (`baton executor`, `baton worker`, `baton projector`,
# `baton api`, `baton eventstore copy`, ...). No build step: bin/baton.js runs the TypeScript
# sources through tsx, which is a runtime dependency for that reason (package.json), so a
# production install (--omit=dev) is all the image needs.
#
#   docker build -t baton:local .                    # the image docker-compose.yml runs
#   docker build --target typecheck .                # optional: type-check the sources in a container
#
# Stages: base (Node and the work dir), typecheck (every dependency and tsc; only built when
# targeted), runtime (production dependencies and the sources, run as the unprivileged `node` user).

FROM node:20-bookworm-slim AS base
WORKDIR /app
ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

FROM base AS typecheck
COPY package.json package-lock.json ./
RUN npm ci --include=dev
COPY tsconfig.json vitest.config.ts ./
COPY bin ./bin
COPY src ./src
COPY actors ./actors
COPY schemas ./schemas
COPY projections ./projections
COPY examples ./examples
COPY test ./test
RUN npx tsc --noEmit -p .

FROM base AS runtime
COPY package.json package-lock.json ./
# Production dependencies only. Install scripts stay on: esbuild (under tsx) checks its binary.
RUN npm ci --omit=dev && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY actors ./actors
COPY schemas ./schemas
COPY projections ./projections
COPY examples ./examples
# The sources stay root-owned and read-only to the process; only BATON_DATA_DIR (./.baton: copy
# checkpoints, the embedded Postgres of `baton dev`) is the node user's.
RUN mkdir -p /app/.baton && chown node:node /app/.baton
USER node
ENTRYPOINT ["node", "bin/baton.js"]
CMD ["--help"]
