#!/usr/bin/env node
// Drives one AG-UI thread through the gateway with the official TypeScript client.
//
//   node run_agent.mjs <spec.json>
//
// spec: {
//   "url": "http://127.0.0.1:PORT/agents/demo",
//   "threadId": "t-1",
//   "headers": {...},              optional, sent with every request
//   "timeoutMs": 60000,            optional, per run
//   "continueOnError": false,      optional, keep running steps after one fails
//   "steps": [{
//     "runId": "r1",
//     "messages": [...],           AG-UI messages added to the agent before the run
//     "resume": [ResumeEntry],     optional, passed to runAgent as is
//     "respond": [...] | {...},    optional, instead of "resume": answers to the agent's
//                                  pendingInterrupts, given in their order (array) or by
//                                  interrupt id (object), each {"status": "resolved",
//                                  "payload": ...} or {"status": "cancelled"}; turned into
//                                  the resume list by the client's buildResumeArray
//     "forwardedProps": {...}      optional
//   }]
// }
//
// stdout: one JSON object (and nothing else):
//   {"steps": [{"events", "newMessages", "error", "pendingInterrupts", "resume",
//               "rejectedEvent", "wireEvents", "warnings"}], "messages", "state"}
// "events" are the events the client accepted (after its enforcement, chunk expansion and
// verifyEvents: what its subscribers are fed); "wireEvents" what it parsed off the SSE
// stream before that; "rejectedEvent" the first wire event it did not accept when the run
// failed; "warnings" its console.warn output (e.g. enforcement stripping unknown fields);
// "resume" the resume list sent. A RUN_ERROR the agent sends is a valid stream: the step
// has error null and the RUN_ERROR among its events. Exit code 0 when every
// run succeeded as far as the client is concerned (its verification accepted the
// stream), 1 when a run failed (error on stderr and in the step), 2 on bad usage.

import { readFileSync } from "node:fs";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { tap } from "rxjs";

// stdout carries the result only: route every console channel but `error` to stderr,
// and keep the client's warnings (e.g. enforcement stripping unknown fields) per step.
let warnings = [];
const toStderr = (...args) => process.stderr.write(args.map(String).join(" ") + "\n");
console.log = console.info = console.debug = toStderr;
console.warn = (...args) => {
  warnings.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
  toStderr(...args);
};

// Records each run's events twice: as parsed off the wire (`run`, before the client's
// enforcement and verification) and as accepted by verification (`apply`, the stage that
// feeds subscribers). Subscribers' onEvent lags behind (it is asynchronous), so it would
// miss accepted events when a later one is rejected.
class RecordingAgent extends HttpAgent {
  wire = [];
  accepted = [];

  run(input) {
    return super.run(input).pipe(tap((event) => this.wire.push(structuredClone(event))));
  }

  apply(input, events$, subscribers) {
    const accepted$ = events$.pipe(tap((event) => this.accepted.push(structuredClone(event))));
    return super.apply(input, accepted$, subscribers);
  }
}

function describe(err) {
  if (!(err instanceof Error)) return String(err);
  if (Array.isArray(err.issues)) {
    const issues = err.issues.map((i) => `${(i.path ?? []).join(".") || "(root)"}: ${i.message}`);
    return `${err.name}: ${issues.join("; ")}`;
  }
  return `${err.name}: ${err.message}`;
}

function fail(message) {
  process.stderr.write(`run_agent: ${message}\n`);
  process.exit(2);
}

function resumeFor(step, agent) {
  if (step.respond === undefined) return step.resume;
  if (step.resume !== undefined) throw new Error("a step takes 'resume' or 'respond', not both");
  const pending = agent.pendingInterrupts ?? [];
  let responses = step.respond;
  if (Array.isArray(responses)) {
    if (responses.length !== pending.length) {
      throw new Error(
        `'respond' has ${responses.length} answers for ${pending.length} pending interrupts`,
      );
    }
    responses = Object.fromEntries(pending.map((interrupt, i) => [interrupt.id, responses[i]]));
  }
  return buildResumeArray(pending, responses);
}

async function runStep(agent, step, timeoutMs) {
  const result = {
    events: [],
    newMessages: [],
    error: null,
    pendingInterrupts: null,
    resume: null,
    rejectedEvent: null,
    wireEvents: [],
    warnings: [],
  };
  warnings = result.warnings;
  agent.wire = result.wireEvents;
  agent.accepted = result.events;
  const abortController = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abortController.abort();
  }, timeoutMs);
  try {
    agent.addMessages(step.messages ?? []);
    const resume = resumeFor(step, agent);
    result.resume = resume ?? null;
    const { newMessages } = await agent.runAgent(
      {
        runId: step.runId,
        ...(resume !== undefined && { resume }),
        ...(step.forwardedProps !== undefined && { forwardedProps: step.forwardedProps }),
        abortController,
      },
    );
    result.newMessages = newMessages;
    // The client swallows aborts, so a timed-out run "succeeds" with what it got.
    if (timedOut) throw new Error(`run ${step.runId} timed out after ${timeoutMs} ms`);
  } catch (err) {
    result.error = describe(err);
    // The first wire event verification did not pass on (exact while the producer sends
    // no *_CHUNK events, which the client expands before verifying).
    result.rejectedEvent = result.wireEvents[result.events.length] ?? null;
    process.stderr.write(
      `run_agent: step ${JSON.stringify(step.runId)} failed: ${result.error}\n` +
        (result.rejectedEvent
          ? `run_agent: rejected event: ${JSON.stringify(result.rejectedEvent)}\n`
          : ""),
    );
  } finally {
    clearTimeout(timer);
    result.pendingInterrupts = Array.isArray(agent.pendingInterrupts)
      ? structuredClone(agent.pendingInterrupts)
      : null;
  }
  return result;
}

async function main() {
  const [specPath] = process.argv.slice(2);
  if (!specPath) fail("usage: node run_agent.mjs <json-spec-file>");
  let spec;
  try {
    spec = JSON.parse(readFileSync(specPath, "utf8"));
  } catch (err) {
    fail(`cannot read spec ${specPath}: ${err.message}`);
  }
  if (typeof spec?.url !== "string" || !Array.isArray(spec.steps)) {
    fail("the spec needs a 'url' string and a 'steps' array");
  }

  const agent = new RecordingAgent({
    url: spec.url,
    threadId: spec.threadId,
    headers: spec.headers ?? {},
  });
  const timeoutMs = spec.timeoutMs ?? 60_000;
  const steps = [];
  for (const step of spec.steps) {
    const result = await runStep(agent, step, timeoutMs);
    steps.push(result);
    if (result.error !== null && !spec.continueOnError) break;
  }

  const output = JSON.stringify({ steps, messages: agent.messages, state: agent.state });
  process.exitCode = steps.every((s) => s.error === null) ? 0 : 1;
  process.stdout.write(output + "\n");
}

main().catch((err) => {
  process.stderr.write(`run_agent: ${err?.stack ?? err}\n`);
  process.exit(2);
});
