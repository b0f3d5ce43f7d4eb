// Public surface of actions: what a user's actions module and the worker host import.
export * from './action.ts';
export * from './registry.ts';
export * from './builtin.ts';
export * from './load.ts';
