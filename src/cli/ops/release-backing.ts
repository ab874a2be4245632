// `release-backing --workspace-id <id>` (extra, docs/contract.md#extras): removes a paused workspace's backing; refuses a ready one.
import { okResponse, workspaceOperation } from "../lifecycle-command.js";

export default workspaceOperation("workspace.release-backing", okResponse);
