import { writeFileSync } from "node:fs";
import { GENERATED_FILE, renderRouteTable } from "./route-table";

/** `npm run test:routes`: rewrites test/routes.generated.ts from the route tree. */
writeFileSync(GENERATED_FILE, renderRouteTable());
console.log(`wrote ${GENERATED_FILE}`);
