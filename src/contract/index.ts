// The contract module's public surface: import wire shapes and codecs from here.
export * from "./schemas.js";
export * from "./codec.js";
export * from "./ndjson.js";
export * from "./fd4-phases.js";
