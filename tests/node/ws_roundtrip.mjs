// A non-Python client of Sluice's WebSocket API (Pulsar's /ws/v2 protocol), with the `ws`
// package: subscribe, produce N messages, receive them and acknowledge each by its messageId;
// print one JSON line with what happened. tests/workers/test_websocket_node.py runs it.
//
//   node ws_roundtrip.mjs ws://127.0.0.1:8080 persistent/acme/orders/ws-node sub 10
import WebSocket from "ws";

const [base, topic, subscription, countText] = process.argv.slice(2);
const count = Number(countText);
if (!base || !topic || !subscription || !(count > 0)) {
  console.error("usage: node ws_roundtrip.mjs WS_BASE_URL TOPIC_PATH SUBSCRIPTION COUNT");
  process.exit(2);
}

const timer = setTimeout(() => {
  console.error(`ws_roundtrip: timed out (${JSON.stringify(result)})`);
  process.exit(1);
}, 30_000);

const result = { sent: [], received: [], acked: 0, errors: [] };

function open(url) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once("open", () => resolve(socket));
    socket.once("error", reject);
  });
}

function closed(socket) {
  return new Promise((resolve) => {
    socket.once("close", resolve);
    socket.close();
  });
}

// The consumer first: a new subscription starts at the end of the topic, as in Pulsar.
const consumer = await open(`${base}/ws/v2/consumer/${topic}/${subscription}?subscriptionType=Shared`);
const received = new Promise((resolve) => {
  consumer.on("message", (data) => {
    const message = JSON.parse(data.toString());
    result.received.push({
      payload: Buffer.from(message.payload, "base64").toString("utf8"),
      messageId: message.messageId,
      properties: message.properties ?? {},
      redeliveryCount: message.redeliveryCount,
    });
    consumer.send(JSON.stringify({ messageId: message.messageId }));
    result.acked += 1;
    if (result.received.length === count) resolve();
  });
});

const producer = await open(`${base}/ws/v2/producer/${topic}`);
const answers = new Map();
producer.on("message", (data) => {
  const answer = JSON.parse(data.toString());
  const settle = answers.get(answer.context);
  if (settle) settle(answer);
});
for (let i = 0; i < count; i++) {
  const context = `c${i}`;
  const answer = new Promise((resolve) => answers.set(context, resolve));
  producer.send(
    JSON.stringify({
      payload: Buffer.from(`node-${i}`).toString("base64"),
      properties: { client: "node", index: String(i) },
      context,
    }),
  );
  const { result: status, messageId, errorMsg } = await answer;
  if (status === "ok") result.sent.push({ context, messageId });
  else result.errors.push({ context, status, errorMsg });
}

await received;
// Acknowledgements have no answer in Pulsar's protocol: a short pause lets the last ones
// leave before the connection closes.
await new Promise((resolve) => setTimeout(resolve, 200));
await Promise.all([closed(producer), closed(consumer)]);
clearTimeout(timer);
console.log(JSON.stringify(result));
