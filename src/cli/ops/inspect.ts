// `inspect --workspace-id <id>`: the workspace's durable state, read from its remote manifest.
import { workspaceOperation } from "../lifecycle-command.js";
import { inspectionResponse } from "../../workspace/public-state.js";

export default workspaceOperation("workspace.inspect", inspectionResponse);
