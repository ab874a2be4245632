// `pause --workspace-id <id>`: marks the workspace paused and SIGSTOPs its process set (a missing workspace is a no-op).
import { okResponse, workspaceOperation } from "../lifecycle-command.js";

export default workspaceOperation("workspace.pause", okResponse);
