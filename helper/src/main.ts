// paseo-workspace-helper entry point (placeholder until the helper lands).
process.stderr.write("paseo-workspace-helper: not built yet\n");
process.exit(1);
