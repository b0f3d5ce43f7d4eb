// The production stacks as Compose sees them: `docker-compose config` (Debian's docker-compose,
// which needs no Docker engine) validates and resolves docker-compose.yml alone (Postgres as the
// event store) and with docker-compose.eventstoredb.yml, and the resolved files are checked for
// the topology README.md promises: services, health checks, start order, volumes, one env file
// that Baton's own config accepts. The Dockerfile is checked as text (no engine to build it here).
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const BATON_HOSTS = ['executor', 'worker-1', 'worker-2', 'projector', 'api'];
const SERVERS = ['postgres', 'nats'];
const HOST_NEEDS: Record<string, string[]> = {
  executor: ['postgres', 'nats'],
  'worker-1': ['postgres', 'nats'],
  'worker-2': ['postgres', 'nats'],
  projector: ['postgres'],
  api: ['postgres', 'nats', 'projector'],
};

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string | number | null>;
  env_file?: string | string[];
  depends_on?: Record<string, { condition?: string }> | string[];
  healthcheck?: { test?: string[] | string; disable?: boolean };
  ports?: (string | { host_ip?: string; published?: string | number; target?: number })[];
  volumes?: (string | { type?: string; source?: string; target?: string })[];
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

let composeBin: string;
let scratch: string;

/** `docker-compose [-f file]… config`, resolved, from a clean environment: no .env, no BATON_* or COMPOSE_* of the caller. */
async function composeConfig(files: string[]): Promise<ComposeFile> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_') && !k.startsWith('COMPOSE_')));
  const emptyEnvFile = path.join(scratch, 'empty.env');
  const args = ['--env-file', emptyEnvFile, '--project-directory', ROOT, ...files.flatMap((f) => ['-f', path.join(ROOT, f)]), 'config'];
  try {
    const { stdout } = await run(composeBin, args, { cwd: ROOT, env, timeout: 60_000 });
    return parseYaml(stdout) as ComposeFile;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`docker-compose ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

const dependsOn = (s: Service): Record<string, string | undefined> =>
  Array.isArray(s.depends_on) ? Object.fromEntries(s.depends_on.map((d) => [d, undefined])) : Object.fromEntries(Object.entries(s.depends_on ?? {}).map(([k, v]) => [k, v.condition]));
const healthTest = (s: Service): string => (Array.isArray(s.healthcheck?.test) ? s.healthcheck.test.join(' ') : (s.healthcheck?.test ?? ''));
const volumeMounts = (s: Service): string[] => (s.volumes ?? []).map((v) => (typeof v === 'string' ? v.split(':').slice(0, 2).join(':') : `${v.source}:${v.target}`));
const publishedHostIps = (s: Service): string[] => (s.ports ?? []).map((p) => (typeof p === 'string' ? p.split(':')[0]! : (p.host_ip ?? '0.0.0.0')));
const stringEnv = (s: Service): Record<string, string> => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]));
const option = (command: string[] | undefined, name: string): string | undefined => {
  const i = (command ?? []).indexOf(name);
  return i >= 0 ? command![i + 1] : undefined;
};

/** KEY=value lines of .env.example (comments and blank lines skipped). */
async function envExample(): Promise<Record<string, string>> {
  const text = await fs.readFile(path.join(ROOT, '.env.example'), 'utf8');
  return Object.fromEntries(
    text
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

function checkCommonTopology(c: ComposeFile, env: Record<string, string>, extraServers: string[]): void {
  expect(Object.keys(c.services).sort()).toEqual([...SERVERS, ...extraServers, ...BATON_HOSTS].sort());

  for (const [name, s] of Object.entries(c.services)) {
    expect(healthTest(s), `${name} has a health check`).not.toBe('');
    expect(s.healthcheck?.disable, name).not.toBe(true);
    for (const ip of publishedHostIps(s)) expect(ip, `${name} publishes on loopback only`).toBe('127.0.0.1');
    for (const [dep, condition] of Object.entries(dependsOn(s))) {
      expect(condition, `${name} waits for ${dep} to be healthy`).toBe('service_healthy');
      expect(healthTest(c.services[dep]!), `${dep}, which ${name} waits for, has a health check`).not.toBe('');
    }
  }

  for (const name of BATON_HOSTS) {
    const s = c.services[name]!;
    expect(s.image, name).toBe('baton:local');
    expect(s.build, `${name} builds the image (so none of them tries to pull baton:local)`).toBeDefined();
    expect(Object.keys(dependsOn(s)).sort(), `${name}'s dependencies`).toEqual([...HOST_NEEDS[name]!, ...extraServers].sort());
    // One env file: every setting of .env.example reaches every host unchanged, but for what the
    // stack overrides on purpose.
    const hostEnv = stringEnv(s);
    for (const [k, v] of Object.entries(env)) {
      if (k === 'BATON_EVENTSTORE_URL' && extraServers.includes('eventstoredb')) continue;
      if (name === 'api' && (k === 'BATON_API_HOST' || k === 'BATON_API_PORT')) continue;
      expect(hostEnv[k], `${name}: ${k} from .env.example`).toBe(v);
    }
    // ... and Baton's own config accepts it (a bad URL or duration would stop every host).
    expect(() => loadConfig(hostEnv, '/app'), name).not.toThrow();
    // The health check asks the host's own /healthz, on the port the host serves it on.
    const metricsPort = option(s.command, '--metrics-port');
    expect(option(s.command, '--metrics-host'), `${name} serves /healthz beyond loopback`).toBe('0.0.0.0');
    expect(hostEnv.METRICS_PORT, `${name}: METRICS_PORT matches --metrics-port`).toBe(metricsPort);
    expect(healthTest(s), name).toContain('/healthz');
    if (name === 'api') expect(healthTest(s)).toContain(`127.0.0.1:${metricsPort}/healthz`);
  }
  expect(c.services.executor!.command?.[0]).toBe('executor');
  expect(c.services.projector!.command?.[0]).toBe('projector');
  expect(c.services.api!.command?.[0]).toBe('api');
  const workerIds = ['worker-1', 'worker-2'].map((w) => {
    expect(c.services[w]!.command?.[0]).toBe('worker');
    return option(c.services[w]!.command, '--id');
  });
  expect(new Set(workerIds).size, 'two workers with distinct ids').toBe(2);

  const api = stringEnv(c.services.api!);
  expect(api.BATON_API_HOST).toBe('0.0.0.0');
  expect(api.BATON_API_TOKEN, 'the API refuses 0.0.0.0 without a token').toMatch(/\S/);
  expect(loadConfig(api, '/app').apiToken).toBe(env.BATON_API_TOKEN);

  const pg = c.services.postgres!;
  expect(volumeMounts(pg)).toContain('postgres-data:/var/lib/postgresql/data');
  expect(healthTest(pg)).toContain('pg_isready');
  expect(stringEnv(pg).POSTGRES_PASSWORD).toBe(env.POSTGRES_PASSWORD);
  const dbUrl = new URL(env.BATON_DATABASE_URL!);
  expect([dbUrl.hostname, dbUrl.username, dbUrl.password, dbUrl.pathname]).toEqual(['postgres', env.POSTGRES_USER, env.POSTGRES_PASSWORD, `/${env.POSTGRES_DB}`]);

  const nats = c.services.nats!;
  expect(nats.command).toEqual(expect.arrayContaining(['-js', '-sd', '/data']));
  expect(volumeMounts(nats)).toContain('nats-data:/data');
  expect(healthTest(nats)).toContain('/healthz');
  expect(new URL(env.BATON_NATS_URL!).host).toBe('nats:4222');
}

describe('the compose files, as `docker-compose config` resolves them', () => {
  beforeAll(async () => {
    const found = await run('sh', ['-c', 'command -v docker-compose']).catch(() => undefined);
    if (!found?.stdout.trim()) {
      throw new Error(
        'docker-compose is not installed, and this test validates the compose files with it. ' +
          'Install Debian\'s package: `apt-get update && apt-get install -y docker-compose` (as root; .ci/run does this in CI). ' +
          'It needs no Docker engine.',
      );
    }
    composeBin = found.stdout.trim();
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-compose-'));
    await fs.writeFile(path.join(scratch, 'empty.env'), '');
    return () => fs.rm(scratch, { recursive: true, force: true });
  });

  describe('docker-compose.yml: the default stack (Postgres as the event store)', () => {
    it('is valid, and has every service with its health check, start order, volumes and one env file', async () => {
      const c = await composeConfig(['docker-compose.yml']);
      const env = await envExample();
      checkCommonTopology(c, env, []);
      expect(Object.keys(c.volumes ?? {}).sort()).toEqual(['nats-data', 'postgres-data']);
      for (const name of BATON_HOSTS) {
        expect(loadConfig(stringEnv(c.services[name]!), '/app').eventStoreUrl, `${name} keeps its events in Postgres`).toBeUndefined();
      }
    });
  });

  describe('docker-compose.yml + docker-compose.eventstoredb.yml: the EventStoreDB stack', () => {
    it('adds EventStoreDB, points every Baton host at it and makes each wait for it', async () => {
      const c = await composeConfig(['docker-compose.yml', 'docker-compose.eventstoredb.yml']);
      const env = await envExample();
      checkCommonTopology(c, env, ['eventstoredb']);
      expect(Object.keys(c.volumes ?? {}).sort()).toEqual(['eventstoredb-data', 'nats-data', 'postgres-data']);

      const esdb = c.services.eventstoredb!;
      expect(esdb.image).toMatch(/^(docker\.eventstore\.com\/)?eventstore\/eventstore:24\.10$/);
      expect(stringEnv(esdb)).toMatchObject({ EVENTSTORE_INSECURE: 'true', EVENTSTORE_RUN_PROJECTIONS: 'None', EVENTSTORE_CLUSTER_SIZE: '1' });
      expect(volumeMounts(esdb)).toContain('eventstoredb-data:/var/lib/eventstore');
      expect(healthTest(esdb)).toMatch(/curl .*http:\/\/127\.0\.0\.1:2113\/health\/live/);

      for (const name of BATON_HOSTS) {
        const config = loadConfig(stringEnv(c.services[name]!), '/app');
        expect(config.eventStoreUrl, name).toBe('esdb://eventstoredb:2113?tls=false');
        expect(config.databaseUrl, `${name} keeps the read model in Postgres`).toBe(env.BATON_DATABASE_URL);
      }
    });
  });

  describe('.env.example', () => {
    it('is the one file every container reads, and a .env copy of it takes over (BATON_ENV_FILE)', async () => {
      const env = await envExample();
      expect(env.BATON_ENV_FILE).toBe('.env');
      expect(env.BATON_EVENTSTORE_URL, 'the default stack keeps its events in Postgres').toBe('');
      // A .env in the project directory: Compose reads it for interpolation, and its
      // BATON_ENV_FILE=.env switches every container to it.
      const project = path.join(scratch, 'project');
      await fs.mkdir(project, { recursive: true });
      for (const f of ['docker-compose.yml', '.env.example']) await fs.copyFile(path.join(ROOT, f), path.join(project, f));
      const text = await fs.readFile(path.join(ROOT, '.env.example'), 'utf8');
      await fs.writeFile(path.join(project, '.env'), text.replace('BATON_LOG_LEVEL=info', 'BATON_LOG_LEVEL=debug').replace('BATON_COMPOSE_API_PORT=4000', 'BATON_COMPOSE_API_PORT=4100'));
      const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_') && !k.startsWith('COMPOSE_')));
      const { stdout } = await run(composeBin, ['config'], { cwd: project, env: cleanEnv, timeout: 60_000 });
      const c = parseYaml(stdout) as ComposeFile;
      expect(stringEnv(c.services.executor!).BATON_LOG_LEVEL).toBe('debug');
      expect(JSON.stringify(c.services.api!.ports)).toContain('4100');
    });
  });
});

describe('Dockerfile', () => {
  it('is multi-stage, installs production dependencies in the final stage and runs bin/baton.js as a non-root user', async () => {
    const text = await fs.readFile(path.join(ROOT, 'Dockerfile'), 'utf8');
    const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    const froms = lines.map((l, i) => [l, i] as const).filter(([l]) => /^FROM\s/i.test(l));
    expect(froms.length, 'stages').toBeGreaterThanOrEqual(2);
    const final = lines.slice(froms[froms.length - 1]![1]);
    expect(final.some((l) => /^RUN\s.*npm ci\b.*--omit=dev/.test(l)), 'npm ci --omit=dev in the final stage').toBe(true);
    const users = final.filter((l) => /^USER\s/i.test(l));
    expect(users.length, 'the final stage sets USER').toBeGreaterThan(0);
    expect(users[users.length - 1]!.split(/\s+/)[1], 'non-root').not.toMatch(/^(root|0)(:|$)/);
    expect(final.findIndex((l) => /^USER\s/i.test(l)), 'USER before ENTRYPOINT').toBeLessThan(final.findIndex((l) => /^ENTRYPOINT\s/i.test(l)));
    expect(final.find((l) => /^ENTRYPOINT\s/i.test(l))).toMatch(/\["node",\s*"bin\/baton\.js"\]/);

    // The final stage runs the compiled dist/ from the build stage, copied after the sources (or
    // bin/baton.js would find them newer and run them through tsx instead).
    const distCopy = final.findIndex((l) => /^COPY\s+--from=\S+\s+\/app\/dist\s+\.\/dist$/.test(l));
    expect(distCopy, 'COPY --from=<build stage> /app/dist ./dist in the final stage').toBeGreaterThan(-1);
    expect(distCopy, 'dist after the sources').toBeGreaterThan(final.findIndex((l) => /^COPY\s+src\s/.test(l)));
    const buildStage = lines.slice(froms.find(([l]) => new RegExp(`\\sAS\\s+${final[distCopy]!.match(/--from=(\S+)/)![1]}$`, 'i').test(l))![1]);
    expect(buildStage.some((l) => /^RUN\s.*npm run build\b/.test(l)), 'the build stage runs npm run build').toBe(true);
    // tsx stays a production dependency: TypeScript --actions/--against modules, and the fallback to the sources.
    expect(await fs.readFile(path.join(ROOT, 'bin/baton.js'), 'utf8')).toContain("'tsx/esm/api'");
    const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).toEqual(expect.arrayContaining(['tsx', 'pg', 'nats', '@eventstore/db-client']));

    const ignored = (await fs.readFile(path.join(ROOT, '.dockerignore'), 'utf8')).split('\n').map((l) => l.trim());
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', '.env', '.git']));
  });
});
