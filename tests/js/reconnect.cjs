// Drives HITL with the JS SDK's own Client (npm @langchain/langgraph-sdk), as a chat UI
// would, and prints every part it gets as one JSON line: {event, id, data}; then
// {done: true} (or {error}). The SDK reconnects on its own when the stream drops.
//
//   node reconnect.cjs stream <apiUrl> <apiKey> <threadId> <assistantId> <json payload>
//   node reconnect.cjs join <apiUrl> <apiKey> <threadId> <runId> <lastEventId>
//
// Run with NODE_PATH=var/node/js/node_modules (scripts/ensure-js-clients installs it).
const { Client } = require("@langchain/langgraph-sdk");

const [mode, apiUrl, apiKey, threadId, target, extra] = process.argv.slice(2);
const client = new Client({ apiUrl, apiKey });
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

function open() {
  if (mode === "stream") {
    return client.runs.stream(threadId, target, JSON.parse(extra));
  }
  if (mode === "join") {
    return client.runs.joinStream(threadId, target, { lastEventId: extra });
  }
  throw new Error(`unknown mode ${mode}`);
}

(async () => {
  try {
    for await (const part of open()) {
      say({ event: part.event, id: part.id ?? null, data: part.data });
    }
    say({ done: true });
  } catch (error) {
    say({ error: String(error && error.stack ? error.stack : error) });
    process.exitCode = 1;
  }
})();
