import { describe, expect, it } from "vitest";
import { requestStatus as databaseEnum } from "@/db/schema";
import { requestStatus as apiSchema } from "./schemas";
import { OPEN_REQUEST_STATUSES, REQUEST_STATUSES, TERMINAL_REQUEST_STATUSES } from "./status";

describe("the request statuses", () => {
  it("are one list from which the database enum and the API's zod schema derive", () => {
    expect(databaseEnum.enumValues).toEqual([...REQUEST_STATUSES]);
    expect(apiSchema.options).toEqual([...REQUEST_STATUSES]);
  });

  it("split into open and terminal, every status exactly once", () => {
    expect([...OPEN_REQUEST_STATUSES, ...TERMINAL_REQUEST_STATUSES].sort()).toEqual([...REQUEST_STATUSES].sort());
  });
});
