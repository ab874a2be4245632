// Builds the public contract responses from the agent's private workspace view. Only the fields
// the strict v1 schemas allow leave this module: no root, revision, host or commit.
import type { InspectionResponse, StateResponse } from "../contract/schemas.js";
import type { InspectResult, WorkspaceView } from "../shared/agent-api.js";

export function stateResponse(workspaceId: string, view: WorkspaceView, materializedFreshContent?: boolean): StateResponse {
  return {
    type: "state",
    protocolVersion: 1,
    state: { workspaceId, lifecycle: view.lifecycle, lifecycleEnvironment: { ...view.lifecycleEnvironment } },
    placement: { cwd: view.cwd },
    ...(materializedFreshContent === undefined ? {} : { materializedFreshContent }),
  };
}

export function inspectionResponse(workspaceId: string, result: InspectResult): InspectionResponse {
  if (result.status === "ready" || result.status === "paused") {
    const s = stateResponse(workspaceId, result.view);
    return { type: "inspection", protocolVersion: 1, inspection: { status: result.status, state: s.state, placement: s.placement } };
  }
  if (result.status === "error")
    return { type: "inspection", protocolVersion: 1, inspection: { status: "error", message: result.message } };
  return { type: "inspection", protocolVersion: 1, inspection: { status: "missing" } };
}
