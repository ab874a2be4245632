// `resume --workspace-id <id>`: continues the frozen process set and marks the workspace ready.
import { workspaceOperation } from "../lifecycle-command.js";
import { stateResponse } from "../../workspace/public-state.js";

export default workspaceOperation("workspace.resume", stateResponse);
