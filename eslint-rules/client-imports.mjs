import path from "node:path";

/**
 * A client component (a file whose first statement is the "use client" directive) ships to the browser: it may
 * never import db/ (the schema, the queries, the pool) or lib/config (the server's environment, secrets included).
 * Their types and constants come from modules both sides may import (lib/sponsorship/status.ts, schemas.ts).
 */

const FORBIDDEN = [
  { test: (rel) => rel === "db" || rel.startsWith("db/"), what: "db/" },
  { test: (rel) => /^lib\/config(\.ts)?$/.test(rel), what: "lib/config" },
];

function repoRelative(source, filename, cwd) {
  if (source.startsWith("@/")) return source.slice(2);
  if (source.startsWith("."))
    return path
      .relative(cwd, path.resolve(path.dirname(filename), source))
      .split(path.sep)
      .join("/");
  return undefined;
}

function isClientComponent(program) {
  const first = program.body[0];
  return first?.type === "ExpressionStatement" && first.expression.type === "Literal" && first.expression.value === "use client";
}

export const noServerImportsInClientComponents = {
  meta: {
    type: "problem",
    docs: { description: 'a "use client" file imports neither db/ nor lib/config' },
    messages: { forbidden: 'A "use client" component may not import {{what}} ("{{source}}"): it would ship server code to the browser.' },
    schema: [],
  },
  create(context) {
    let client = false;
    const check = (node, source) => {
      if (!client || typeof source !== "string") return;
      const rel = repoRelative(source, context.filename, context.cwd);
      if (rel === undefined) return;
      const hit = FORBIDDEN.find((f) => f.test(rel));
      if (hit) context.report({ node, messageId: "forbidden", data: { what: hit.what, source } });
    };
    return {
      Program(node) {
        client = isClientComponent(node);
      },
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => node.source.type === "Literal" && check(node, node.source.value),
    };
  },
};

/** The project's own rules, as an ESLint plugin (eslint.config.mjs registers it as `boundaries-local`). */
const plugin = { rules: { "no-server-imports-in-client-components": noServerImportsInClientComponents } };
export default plugin;
