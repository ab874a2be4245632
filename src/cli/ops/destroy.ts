// `destroy --workspace-id <id>`: kills the process set and removes the owned workspace directory (idempotent).
import { okResponse, workspaceOperation } from "../lifecycle-command.js";

export default workspaceOperation("workspace.destroy", okResponse);
