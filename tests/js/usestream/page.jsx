// A chat page built the way LangChain's Agent Chat UI builds one: React and the JS SDK's
// useStream hook, the thread id in the URL (a reload rejoins the run), and the interrupt
// answers Agent Chat UI sends. The test opens it in Chromium with ?apiUrl=&assistantId=
// &apiKey= and clicks its buttons.
import React, { useCallback, useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const END = "__end__"; // langgraph's END, which "Mark as resolved" sends as goto

const params = new URLSearchParams(window.location.search);

// Agent Chat UI keeps the thread id in the query string (nuqs' useQueryState).
function useQueryState(name) {
  const [value, setValue] = useState(() => params.get(name));
  const set = useCallback(
    (next) => {
      const url = new URL(window.location.href);
      if (next == null) url.searchParams.delete(name);
      else url.searchParams.set(name, next);
      window.history.replaceState(null, "", url);
      setValue(next);
    },
    [name],
  );
  return [value, set];
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content ?? [])
    .map((block) => (block.type === "text" ? block.text : ""))
    .join("");
}

function Messages({ messages }) {
  return (
    <ol id="messages">
      {messages.map((message, index) => (
        <li
          key={message.id ?? index}
          className="message"
          data-type={message.type}
          data-id={message.id ?? ""}
        >
          <b>{message.type}</b> <span className="text">{textOf(message.content)}</span>
        </li>
      ))}
    </ol>
  );
}

// The older format: a list of HumanInterrupts, answered with a list of HumanResponses
// (Agent Chat UI's agent-inbox: resumeRun([response]), handleIgnore, handleResolve).
function HumanInterruptCard({ stream, id, requests }) {
  const [text, setText] = useState("");
  const request = requests[0];
  const resume = (response) => stream.submit({}, { command: { resume: [response] } });
  return (
    <section id="interrupt" data-format="human-interrupt" data-id={id}>
      <h2 className="action">{request.action_request.action}</h2>
      <p className="description">{request.description}</p>
      {request.config.allow_accept && (
        <button id="accept" onClick={() => resume({ type: "accept", args: null })}>
          Accept
        </button>
      )}
      {request.config.allow_respond && (
        <>
          <input id="response-text" value={text} onChange={(e) => setText(e.target.value)} />
          <button id="respond" onClick={() => resume({ type: "response", args: text })}>
            Send response
          </button>
        </>
      )}
      {request.config.allow_ignore && (
        <button id="ignore" onClick={() => resume({ type: "ignore", args: null })}>
          Ignore
        </button>
      )}
      <button id="resolve" onClick={() => stream.submit({}, { command: { goto: END } })}>
        Mark as resolved
      </button>
    </section>
  );
}

// LangChain v1's HumanInTheLoopMiddleware: action_requests + review_configs, answered
// with {decisions: [...]} (Agent Chat UI's buildDecisionFromState + resumeRun).
function DecisionCard({ stream, id, request }) {
  const [message, setMessage] = useState("");
  const action = request.action_requests[0];
  const review =
    request.review_configs.find((config) => config.action_name === action.name) ??
    request.review_configs[0];
  const decide = (decision) =>
    stream.submit({}, { command: { resume: { decisions: [decision] } } });
  return (
    <section id="interrupt" data-format="hitl-request" data-id={id}>
      <h2 className="action">{action.name}</h2>
      <p className="description">{action.description}</p>
      <pre className="args">{JSON.stringify(action.args)}</pre>
      {review.allowed_decisions.map((type) => (
        <button
          key={type}
          className="decision"
          data-decision={type}
          onClick={() =>
            decide(
              type === "reject"
                ? { type, message }
                : type === "edit"
                  ? { type, edited_action: { name: action.name, args: action.args } }
                  : { type },
            )
          }
        >
          {type}
        </button>
      ))}
      <input id="decision-message" value={message} onChange={(e) => setMessage(e.target.value)} />
    </section>
  );
}

function Interrupt({ stream }) {
  const value = stream.interrupt?.value;
  if (value == null) return null;
  const id = stream.interrupt.id ?? "";
  if (Array.isArray(value) && value[0]?.action_request) {
    return <HumanInterruptCard key={id} id={id} stream={stream} requests={value} />;
  }
  if (Array.isArray(value?.action_requests)) {
    return <DecisionCard key={id} id={id} stream={stream} request={value} />;
  }
  return (
    <section id="interrupt" data-format="other">
      <pre>{JSON.stringify(value)}</pre>
    </section>
  );
}

function App() {
  const [threadId, setThreadId] = useQueryState("threadId");
  const [input, setInput] = useState("");
  const stream = useStream({
    apiUrl: params.get("apiUrl"),
    apiKey: params.get("apiKey") ?? undefined, // the SDK sends it as x-api-key
    assistantId: params.get("assistantId"),
    threadId: threadId ?? null,
    onThreadId: setThreadId,
    fetchStateHistory: true,
    reconnectOnMount: true,
    messagesKey: "messages",
  });

  // Agent Chat UI's handleSubmit: a human message with text blocks, resumable, values.
  const send = (event) => {
    event.preventDefault();
    if (!input.trim()) return;
    const message = {
      id: crypto.randomUUID(),
      type: "human",
      content: [{ type: "text", text: input }],
    };
    stream.submit(
      { messages: [message] },
      {
        streamMode: ["values"],
        streamSubgraphs: true,
        streamResumable: true,
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }),
      },
    );
    setInput("");
  };

  return (
    <main
      id="chat"
      data-loading={String(stream.isLoading)}
      data-thread={threadId ?? ""}
      data-error={stream.error ? String(stream.error) : ""}
    >
      <Messages messages={stream.messages} />
      <Interrupt stream={stream} />
      <form onSubmit={send}>
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} />
        <button id="submit" type="submit">
          Send
        </button>
        {stream.isLoading && (
          <button id="stop" type="button" onClick={() => stream.stop()}>
            Stop
          </button>
        )}
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
