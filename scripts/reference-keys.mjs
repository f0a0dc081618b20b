#!/usr/bin/env node
// Canonicalizes session keys the way the reference's gateway does before any
// of its session-state code sees them (normalizeSessionKeyPreservingOpaquePeerIds,
// OpenClaw's own function, loaded from its installed bundle by name): reads a
// JSON array of keys on stdin and prints the array of canonical keys.
//
// scripts/differential.py runs it so that the oracle, which drives the
// reference's inner functions, gets the keys its gateway would give them;
// vigil sim gets the keys as written and canonicalizes them itself. A test
// tool, like the oracle: nothing of OpenClaw goes into vigil.
//   node scripts/reference-keys.mjs < keys.json
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const HOME = process.env.VIGIL_ORACLE_HOME ?? path.join(os.homedir(), ".cache", "vigil-oracle");
const DIST = process.env.OPENCLAW_DIST ?? path.join(HOME, "openclaw", "node_modules", "openclaw", "dist");
const NAME = "normalizeSessionKeyPreservingOpaquePeerIds";

async function load() {
  for (const f of fs.readdirSync(DIST).filter((f) => f.startsWith("session-key-") && f.endsWith(".mjs"))) {
    if (!fs.readFileSync(path.join(DIST, f), "utf8").includes(`function ${NAME}(`)) continue;
    const mod = await import(pathToFileURL(path.join(DIST, f)).href);
    const fn = Object.values(mod).find((v) => typeof v === "function" && v.name === NAME);
    if (fn) return fn;
  }
  throw new Error(`${NAME} not found in ${DIST}/session-key-*.mjs`);
}

const normalize = await load();
const keys = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(`${JSON.stringify(keys.map((k) => normalize(k)))}\n`);
