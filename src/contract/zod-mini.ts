// The zod every runtime process builds its schemas with: zod's functional API ("zod/mini"). zod
// installs each schema class's members on its prototype the first time one is built, and the
// classic API's fifty-odd chainable methods per class made that a large part of an exec's start
// (the envelope, the options, the broker's lines); the functional API has a handful. Parsing is
// zod's core either way, so what is accepted and every issue reported stay the same, once the
// English messages are in place (the classic API configures them on first construction; the
// functional one leaves that to us).
import { config } from "zod/mini";
import { en } from "zod/locales";

if (!config().localeError) config(en());

export * from "zod/mini";
