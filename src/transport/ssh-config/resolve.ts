// From the runtime options to the chain of SSH hops that reaches the host, the way `ssh` would:
// `host` may be a ~/.ssh/config alias; ProxyJump lists and the jump hosts' own ProxyJump lines
// become hops, each with its own user, port, keys and known_hosts; options given explicitly in
// Paseo's `options` win over the config for the target (as `ssh -o` would). OpenSSH evaluates the
// config where `ssh` exists (`ssh -G`); elsewhere the fallback evaluator does.
import { existsSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";
import type { RuntimeOptions } from "../options.js";
import type { Evaluated, Source } from "./dump.js";
import { interpretDump, type HostConfig } from "./host-config.js";
import { findSsh, runSshG, type EvalRequest } from "./ssh-g.js";
import { cachedSshG } from "./ssh-g-cache.js";
import { localIdentity, proxyCommandTokens, expandTokens, type LocalIdentity } from "./tokens.js";

/** Longer chains are almost certainly a config loop. */
export const MAX_HOPS = 8;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_KEEPALIVE_MS = 15_000;

/** One SSH connection of the chain; everything needed to connect and verify it, no secrets. */
export interface Hop {
  /** How messages name this hop: the alias, plus the address when it differs. */
  label: string;
  host: string;
  port: number;
  user: string;
  /** Tried in order; missing ones are skipped (unless named by the identityFile option). */
  identityFiles: string[];
  /** True when identityFiles came from the identityFile option (a missing one is then an error). */
  identityFromOption: boolean;
  identitiesOnly: boolean;
  /** ssh-agent socket, or null for none. */
  agentSocket: string | null;
  userKnownHostsFiles: string[];
  globalKnownHostsFiles: string[];
  hostKeyAlias?: string;
  /** StrictHostKeyChecking accept-new and the acceptNewHostKeys opt-in. */
  acceptNew: "off" | "configured" | "on";
  connectTimeoutMs: number;
  keepaliveIntervalMs: number;
  keepaliveCountMax: number;
  /** Expanded ProxyCommand that carries this hop's connection (first hop only). */
  proxyCommand?: string;
  /** Config lines behind the values (keyword -> `file:line: text`), for doctor. */
  sources?: Record<string, string[]>;
}

export interface ConnectionPlan {
  /** Outermost first; the last hop is the target. */
  hops: Hop[];
  /** How the config was evaluated. */
  via: "ssh -G" | "parser" | "options";
}

export interface ResolveOptions {
  /** Force the evaluator (tests); default: ssh -G when `ssh` is on PATH. */
  evaluator?: "ssh -G" | "parser";
  /** Also record which config lines set each value (doctor). */
  provenance?: boolean;
  local?: LocalIdentity;
  /** A private directory where `ssh -G` answers may be kept between processes (ssh-g-cache.ts). */
  cacheDir?: string | null;
}

function given(options: RuntimeOptions, key: keyof RuntimeOptions): boolean {
  return options.explicit ? options.explicit.includes(key) : options[key] !== undefined;
}

function label(alias: string, host: string, port: number): string {
  const addr = port === 22 ? host : `${host}:${port}`;
  return alias === host || alias === addr ? addr : `${alias} (${addr})`;
}

/** The chain for options whose sshConfig is false: one hop, exactly the options. */
function literalPlan(o: RuntimeOptions): ConnectionPlan {
  return {
    via: "options",
    hops: [
      {
        label: label(o.host, o.host, o.port),
        host: o.host,
        port: o.port,
        user: o.user,
        identityFiles: o.identityFile ? [o.identityFile] : [],
        identityFromOption: o.identityFile !== undefined,
        identitiesOnly: false,
        agentSocket: process.env.SSH_AUTH_SOCK || null,
        userKnownHostsFiles: [o.knownHostsFile],
        globalKnownHostsFiles: [],
        acceptNew: "off",
        connectTimeoutMs: o.connectTimeoutMs,
        keepaliveIntervalMs: o.keepaliveIntervalMs,
        keepaliveCountMax: 3,
      },
    ],
  };
}

function formatSources(sources: Map<string, Source[]>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, list] of sources) out[k] = list.map((s) => `${s.file}:${s.line}: ${s.text}`);
  return out;
}

class Resolver {
  private readonly ssh: string | null;
  constructor(
    private readonly options: RuntimeOptions,
    private readonly opts: ResolveOptions,
    private readonly local: LocalIdentity,
  ) {
    this.ssh = opts.evaluator === "parser" ? null : findSsh();
    if (opts.evaluator === "ssh -G" && !this.ssh)
      throw new RuntimeError("input", "ssh -G evaluation requested but no ssh binary is on PATH");
  }

  get via(): ConnectionPlan["via"] {
    return this.ssh ? "ssh -G" : "parser";
  }

  private async evaluate(req: EvalRequest): Promise<{ config: HostConfig; sources?: Record<string, string[]> }> {
    const { evaluateConfig } = this.ssh && !this.opts.provenance ? { evaluateConfig: undefined } : await import("./evaluate.js");
    let ev: Evaluated;
    if (this.ssh) {
      // Doctor (provenance) always asks ssh itself.
      const cacheDir = this.opts.provenance ? null : this.opts.cacheDir;
      const dump = cacheDir ? await cachedSshG(this.ssh, req, this.local, cacheDir) : await runSshG(this.ssh, req);
      ev = { dump, sources: new Map(), via: "ssh -G" };
    } else ev = await evaluateConfig!(req, this.local);
    const config = interpretDump(req.alias, ev.dump, this.local, existsSync);
    if (!this.opts.provenance) return { config };
    // Values come from ssh itself; the evaluator only tells which lines they came from.
    const sources = this.ssh ? (await evaluateConfig!(req, this.local)).sources : ev.sources;
    return { config, sources: formatSources(sources) };
  }

  async chain(req: EvalRequest, path: string[], role: "target" | "jump"): Promise<Hop[]> {
    const isTarget = role === "target";
    if (path.length >= MAX_HOPS) {
      throw new RuntimeError(
        "input",
        `ProxyJump chain to ${path[0]} is longer than ${MAX_HOPS} hops: ${[...path, req.alias].join(" <- ")} (a loop?)`,
      );
    }
    const { config, sources } = await this.evaluate(req);
    const key = `${config.hostname}:${config.port}`;
    const named = label(config.alias, config.hostname, config.port);
    if (path.includes(key)) {
      throw new RuntimeError("input", `ProxyJump loop: ${named} would be reached through itself (${[...path, key].join(" <- ")})`);
    }
    let hops: Hop[] = [];
    if (config.proxyJump !== undefined) {
      const { parseJumpSpec } = await import("./evaluate.js");
      const specs = config.proxyJump.split(",");
      const last = parseJumpSpec(specs.pop()!);
      const rest = specs.join(",");
      hops = await this.chain(
        {
          file: req.file,
          alias: last.host,
          ...(last.user !== undefined ? { user: last.user } : {}),
          ...(last.port !== undefined ? { port: last.port } : {}),
          // `ssh -J a,b target` reaches b with `-J a`: the earlier hops replace b's own ProxyJump.
          ...(rest !== "" ? { proxyJump: rest } : {}),
        },
        [...path, key],
        "jump",
      );
    }
    hops.push(this.hop(config, named, isTarget, sources));
    return hops;
  }

  private hop(c: HostConfig, named: string, isTarget: boolean, sources?: Record<string, string[]>): Hop {
    const o = this.options;
    const explicit = (k: keyof RuntimeOptions) => isTarget && given(o, k);
    const identityFromOption = explicit("identityFile") && o.identityFile !== undefined;
    const agent = c.identityAgent === undefined ? process.env.SSH_AUTH_SOCK || null : c.identityAgent === "none" ? null : c.identityAgent;
    const proxy =
      c.proxyCommand !== undefined && c.proxyJump === undefined
        ? expandTokens(
            "ProxyCommand",
            c.proxyCommand,
            proxyCommandTokens({ alias: c.alias, host: c.hostname, port: c.port, user: c.user, keyAlias: c.hostKeyAlias ?? c.alias }),
            { envVars: false },
          )
        : undefined;
    return {
      label: named,
      host: c.hostname,
      port: c.port,
      user: c.user,
      identityFiles: identityFromOption ? [o.identityFile!] : c.identityFiles,
      identityFromOption,
      identitiesOnly: c.identitiesOnly,
      agentSocket: agent,
      userKnownHostsFiles: explicit("knownHostsFile") ? [o.knownHostsFile] : c.userKnownHostsFiles,
      globalKnownHostsFiles: c.globalKnownHostsFiles,
      ...(c.hostKeyAlias !== undefined ? { hostKeyAlias: c.hostKeyAlias } : {}),
      acceptNew: c.strictHostKeyChecking !== "accept-new" ? "off" : o.acceptNewHostKeys ? "on" : "configured",
      connectTimeoutMs: explicit("connectTimeoutMs")
        ? o.connectTimeoutMs
        : c.connectTimeoutS
          ? c.connectTimeoutS * 1000
          : (o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS),
      keepaliveIntervalMs: explicit("keepaliveIntervalMs")
        ? o.keepaliveIntervalMs
        : c.serverAliveIntervalS > 0
          ? c.serverAliveIntervalS * 1000
          : (o.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS),
      keepaliveCountMax: c.serverAliveCountMax,
      ...(proxy !== undefined ? { proxyCommand: proxy } : {}),
      ...(sources !== undefined ? { sources } : {}),
    };
  }
}

/** Resolves the hop chain for `options` (one hop when there is no jump host). */
export async function resolvePlan(options: RuntimeOptions, opts: ResolveOptions = {}): Promise<ConnectionPlan> {
  if (options.sshConfig === false) return literalPlan(options);
  const r = new Resolver(options, opts, opts.local ?? localIdentity());
  const req: EvalRequest = {
    file: options.sshConfig ?? null,
    alias: options.host,
    ...(given(options, "user") ? { user: options.user } : {}),
    ...(given(options, "port") ? { port: options.port } : {}),
  };
  return { hops: await r.chain(req, [], "target"), via: r.via };
}

/** Resolves one host's config without building a chain (golden tests, doctor). */
export async function resolveHostConfig(req: EvalRequest, opts: ResolveOptions = {}): Promise<HostConfig> {
  const local = opts.local ?? localIdentity();
  if (opts.evaluator === "parser" || (opts.evaluator === undefined && !findSsh())) {
    const { evaluateConfig } = await import("./evaluate.js");
    return interpretDump(req.alias, (await evaluateConfig(req, local)).dump, local, existsSync);
  }
  const ssh = findSsh();
  if (!ssh) throw new RuntimeError("input", "ssh -G evaluation requested but no ssh binary is on PATH");
  return interpretDump(req.alias, await runSshG(ssh, req), local, existsSync);
}
