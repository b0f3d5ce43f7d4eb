// Input rules: what every front door (GraphQL API, CLI, library) accepts, in one place.
export * from './rules.ts';
export * from './nearest.ts';
export * from './schemas.ts';
export * from './errors.ts';
