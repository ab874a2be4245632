// `destroy --workspace-id <id>`: brings the workspace's work back, kills the process set and removes
// the owned workspace directory (idempotent; work that could not come back is kept on the host).
import { removalOperation } from "../removal-command.js";

export default removalOperation("workspace.destroy");
