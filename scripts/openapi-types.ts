import { writeFileSync } from "node:fs";
import path from "node:path";
import { API_TYPES_FILE, generateApiTypes } from "@/lib/api/generate-types";

/** `npm run openapi:types`: writes lib/api/types.ts from the OpenAPI document. */

writeFileSync(API_TYPES_FILE, await generateApiTypes());
console.log(`wrote ${path.relative(process.cwd(), API_TYPES_FILE)}`);
