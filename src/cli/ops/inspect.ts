// `inspect --workspace-id <id>`: the workspace's durable state, read from its remote manifest.
import { workspaceOperation } from "../lifecycle-command.js";
import { inspectionResponse } from "../../workspace/public-state.js";
import type { InspectResult } from "../../shared/agent-api.js";

export default workspaceOperation<InspectResult>("inspect", inspectionResponse);
