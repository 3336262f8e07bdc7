import { HttpProblem } from "@/lib/http/problem";
import { defineRoute } from "@/lib/http/route";

/**
 * Any path no other route serves: a problem+json 404 (with X-Request-Id and CORS like every API answer) instead
 * of an HTML page, so a client that mistypes a path gets an answer it can parse.
 */
const notFound = () => {
  throw new HttpProblem("not_found", "No endpoint at this path; see /openapi.json");
};

export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute(
  { GET: notFound, POST: notFound, PUT: notFound, PATCH: notFound, DELETE: notFound },
  { unrouted: notFound },
);
