// Runtime executable entry point (placeholder until the CLI dispatcher lands).
process.stdout.write('{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n');
