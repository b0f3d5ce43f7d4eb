// Types of dist-freshness.js (plain JavaScript: it runs before anything is compiled), for tests that import it.
export declare const SOURCE_DIRS: string[];
export declare const BUILD_INPUTS: string[];
export declare const STAMP: string;
export declare const DIST_MAIN: string;
export declare function sourceFiles(root: string): string[];
export declare function distFreshness(root: string): { fresh: true } | { fresh: false; reason: string };
export declare const SOURCES_NOTICE_SHOWN: string;
export declare function sourcesNotice(dist: { fresh: true } | { fresh: false; reason: string }, env: Record<string, string | undefined>): string;
