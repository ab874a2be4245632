// Run ahead of everything else in each operation bundle (scripts/build.mjs). An operation
// process is one-shot: zod's JIT, which compiles a parser with `new Function` the first time each
// object schema parses, costs more there than it saves, and that code is outside the code cache.
// The interpreted parser accepts and rejects exactly the same values with the same issues.
import * as z from "../contract/zod-mini.js";

z.config({ jitless: true });
