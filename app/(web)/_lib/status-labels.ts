/** How each request status (and pipeline stage) is named on the pages, /request and /dashboard alike. */
export const STATUS_LABELS: Record<string, string> = {
  pending: "Pending",
  approved: "Approved",
  relayed: "Relayed",
  completed: "Completed",
  rejected: "Rejected",
  failed: "Failed",
};
