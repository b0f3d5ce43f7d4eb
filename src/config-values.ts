// How the text of one environment variable becomes a value: the parsers src/config.ts builds
// its schema from. Each refuses with a message naming what was expected, never echoing a value
// that may be a secret (a URL with a password, a token).
import { SCHEMA_NAME } from './db/db-schema.ts';
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseAge, SUGGESTED_RETENTION } from './retention/age.ts';
import { DEFAULT_NAMESPACE, namespaceProblem } from './input/namespace.ts';
import { parseNamespaceLimits } from './executor/namespace-limits.ts';
import { parseNamespaceRateLimits } from './executor/namespace-rate-limits.ts';

// `FOO=` in a shell, a compose file or a .env means "not set", not "set to the empty string".
export const unsetIfEmpty = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

export const urlWith = (protocols: string[], example: string) =>
  z.string().refine(
    (value) => {
      try {
        return protocols.includes(new URL(value).protocol.replace(/:$/, ''));
      } catch {
        return false;
      }
    },
    // Never echo the value: a database URL carries a password.
    { message: `Invalid url: expected ${example}` },
  );

export const port = z.coerce
  .number({ message: 'Invalid port: expected an integer from 1 to 65535' })
  .int('Invalid port: expected an integer from 1 to 65535')
  .min(1, 'Invalid port: expected an integer from 1 to 65535')
  .max(65535, 'Invalid port: expected an integer from 1 to 65535');

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
/** `250ms`, `5s`, `1.5m`, `2h`; a bare number is milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]) * DURATION_UNITS[m[2] ?? 'ms']!;
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}
/** The longest duration a setting takes (BATON_SHUTDOWN_TIMEOUT and the like): a timer past 2^31 - 1 ms would fire at once. */
export const MAX_DURATION_MS = 7 * 24 * 3_600_000;

/** The inverse of parseDuration for messages: the largest unit that divides it (`1h`, `90s`, `250ms`). */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
export const duration = (fallback: number) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .transform((v, ctx) => {
        const ms = parseDuration(v);
        if (ms === undefined || ms < 1 || ms > MAX_DURATION_MS) {
          ctx.addIssue({ code: 'custom', message: `Invalid duration "${v}": expected e.g. 500ms, 5s, 2m or 1h (at least 1 ms, at most 7 days)` });
          return z.NEVER;
        }
        return ms;
      })
      .optional(),
  ).transform((v) => v ?? fallback);
// `forever`, or a duration where 0 means one try; unset stays undefined (each kind of process has its default).
export const waitDuration = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .transform((v, ctx) => {
      if (/^\s*forever\s*$/i.test(v)) return Infinity;
      const ms = parseDuration(v);
      if (ms === undefined || ms > 7 * 24 * 3_600_000) {
        ctx.addIssue({ code: 'custom', message: `Invalid wait "${v}": expected forever, 0 (one try), or a duration such as 30s or 5m (at most 7 days)` });
        return z.NEVER;
      }
      return ms;
    })
    .optional(),
);
export const count = (fallback: number, what: string, max = 1000) => {
  const message = `Invalid ${what}: expected a whole number from 1 to ${max}`;
  return z.preprocess(unsetIfEmpty, z.coerce.number({ message }).int(message).min(1, message).max(max, message).default(fallback));
};

const BYTE_UNITS: Record<string, number> = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };
/** `16384`, `16KiB`, `8MiB`, `1GiB` (binary units); undefined when it is none of those. */
export function parseByteSize(text: string): number | undefined {
  const m = /^\s*(\d+)\s*(b|kib|mib|gib)?\s*$/i.exec(text);
  if (!m) return undefined;
  const bytes = Number(m[1]) * BYTE_UNITS[(m[2] ?? 'b').toLowerCase()]!;
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
export const byteSize = (fallback: number, min: number, max: number) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .transform((v, ctx) => {
        const bytes = parseByteSize(v);
        if (bytes === undefined || bytes < min || bytes > max) {
          ctx.addIssue({ code: 'custom', message: `Invalid size "${v}": expected bytes, or e.g. 16KiB or 8MiB (from ${min} bytes to ${max / 1024 ** 2} MiB)` });
          return z.NEVER;
        }
        return bytes;
      })
      .optional(),
  ).transform((v) => v ?? fallback);

export const onOff = z.preprocess(
  (v) => (typeof v === 'string' ? unsetIfEmpty(v.trim().toLowerCase()) : v),
  z
    .enum(['on', 'off', '1', '0', 'true', 'false'], { message: 'Invalid switch: expected on or off' })
    .default('on')
    .transform((v) => v === 'on' || v === '1' || v === 'true'),
);

// One entry of BATON_HTTP_ALLOW: a host name, an IP address, or a CIDR range (10.0.0.0/8, fd00::/8).
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;
function allowEntryProblem(entry: string): string | undefined {
  const [address, prefix, extra] = entry.split('/');
  const family = isIP(address!);
  if (extra !== undefined) return `"${entry}" is not a host, an address or a CIDR range`;
  if (prefix !== undefined) {
    const max = family === 4 ? 32 : family === 6 ? 128 : 0;
    if (max === 0) return `"${entry}": a CIDR range needs an IP address before the /`;
    if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return `"${entry}": the prefix length must be from 0 to ${max}`;
    return undefined;
  }
  return family !== 0 || HOST_NAME.test(entry) ? undefined : `"${entry}" is not a host, an address or a CIDR range`;
}
export const hostAllowList = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .transform((v, ctx) => {
      const entries = v.split(/[\s,]+/).filter((e) => e !== '');
      for (const entry of entries) {
        const problem = allowEntryProblem(entry);
        if (problem) ctx.addIssue({ code: 'custom', message: `Invalid allow-list entry ${problem}: expected e.g. api.internal, 10.1.2.3, 10.0.0.0/8 or fd00::/8` });
      }
      return entries.map((e) => e.toLowerCase());
    })
    .optional(),
).transform((v) => v ?? []);

// A token travels in an Authorization header: one visible-ASCII word. Messages never echo it.
export const token = z
  .string()
  .regex(/^[\x21-\x7e]+$/, 'Invalid token: expected printable ASCII without spaces')
  .max(1024, 'Invalid token: expected at most 1024 characters');

export const flag = (name: string) =>
  z.preprocess(
    (v) => (typeof v === 'string' ? unsetIfEmpty(v.toLowerCase()) : v),
    z
      .enum(['1', '0', 'true', 'false', 'yes', 'no'], { message: `Invalid flag: expected 1 or 0 (${name})` })
      .optional()
      .transform((v) => v === '1' || v === 'true' || v === 'yes'),
  );

/** BATON_NAMESPACE: a namespace name (src/input/namespace.ts); `default` when unset. */
export const namespaceSetting = z.preprocess(
  unsetIfEmpty,
  z.string().superRefine((v, ctx) => { const p = namespaceProblem(v); if (p) ctx.addIssue({ code: 'custom', message: p }); }).default(DEFAULT_NAMESPACE),
);

/** BATON_NAMESPACE_CONCURRENCY: `team-a=5,team-b=2` (src/executor/namespace-limits.ts). */
export const namespaceLimitsSetting = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return {};
      const r = parseNamespaceLimits(v);
      if (r.ok) return r.limits;
      ctx.addIssue({ code: 'custom', message: r.problem });
      return z.NEVER;
    }),
);

/** BATON_NAMESPACE_RATE_LIMIT: `team-a=100/s,team-b=600/m` (src/executor/namespace-rate-limits.ts). */
export const namespaceRateLimitsSetting = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return {};
      const r = parseNamespaceRateLimits(v);
      if (r.ok) return r.limits;
      ctx.addIssue({ code: 'custom', message: r.problem });
      return z.NEVER;
    }),
);

/** BATON_RETENTION: `off`, or an age such as 90d (src/retention/age.ts). */
export const retentionSetting = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .transform((v, ctx) => {
      if (v.trim() === 'off') return undefined;
      const ms = parseAge(v);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `Invalid age: expected off or an age such as ${SUGGESTED_RETENTION} (the suggested value), 12h or 30m (at least 1s, at most 100 years)` });
        return z.NEVER;
      }
      return ms;
    })
    .optional(),
);

/**
 * Why a BATON_DB_SCHEMA name would take another's tables, or undefined. An installation in schema
 * X keeps its read model in X_read, and scratch schemas (verify's baton_verify_<hex>, rebuilds'
 * <prefix>_rebuild_<projection>) are dropped by any installation's verify or rebuild that finds
 * them unheld (QA: one installation's `projections verify` dropped another's whole schema).
 */
export function dbSchemaClash(name: string): string | undefined {
  const said = `"${name}"`;
  if (name === 'public') return `${said} is where the default installation keeps its tables: leave BATON_DB_SCHEMA unset for it`;
  if (name === 'baton') return `${said} would keep its read model in baton_read, the default installation's: choose another name`;
  if (name === 'baton_read') return `${said} is the default installation's read model: choose another name`;
  if (name.endsWith('_read')) return `${said} ends in _read, the suffix of read-model schemas: it is installation ${name.slice(0, -'_read'.length) || '(none)'}'s read model`;
  if (/^baton_verify_[0-9a-f]{8}$/.test(name) || name.includes('_rebuild_')) return `${said} has the form of a scratch schema that \`baton projections verify\` and \`rebuild\` drop when they find it unused: choose another name`;
  if (name.startsWith('pg_') || name === 'information_schema') return `${said} is reserved by Postgres for its own schemas`;
  return undefined;
}

/** BATON_DB_SCHEMA: a schema name of its own (dbSchemaClash), or unset for the default installation. */
export const dbSchemaSetting = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .regex(SCHEMA_NAME, 'must be 1 to 30 lower-case letters, digits or _, not starting with a digit')
    .superRefine((name, ctx) => {
      const clash = dbSchemaClash(name);
      if (clash) ctx.addIssue({ code: 'custom', message: clash });
    })
    .optional(),
);
