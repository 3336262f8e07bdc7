import type { NextAdapter } from "next";

/** Types of entrypoints-adapter.mjs (plain JavaScript: `next build` imports it without a TypeScript loader). */
export declare const ENTRYPOINTS_FILE: string;
declare const adapter: NextAdapter;
export default adapter;
