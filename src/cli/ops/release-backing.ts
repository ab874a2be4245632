// `release-backing --workspace-id <id>` (extra, contract §14): removes a paused workspace's backing; refuses a ready one.
import { okResponse, workspaceOperation } from "../lifecycle-command.js";

export default workspaceOperation("release-backing", okResponse);
