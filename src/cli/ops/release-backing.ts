// `release-backing --workspace-id <id>` (extra, docs/contract.md#extras): removes a paused workspace's backing; refuses a ready one.
// Its work comes back first, as with destroy (src/cli/removal-command.ts).
import { removalOperation } from "../removal-command.js";

export default removalOperation("workspace.release-backing");
