// Placeholder removed by the API work: GET /health is implemented in lib/http + lib/health.
export function GET() {
  return Response.json({ status: "ok", uptime: Math.floor(process.uptime()) });
}
