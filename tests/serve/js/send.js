// Sends one small trace to an OTLP/HTTP endpoint with the OpenTelemetry JavaScript SDK and its
// OTLP/HTTP exporter (OTLP/JSON), and prints the ids it sent and the export result as JSON.
// Usage: node send.js URL [TOKEN] [SERVICE]
"use strict";
const { context, trace, SpanKind, SpanStatusCode } = require("@opentelemetry/api");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const { TracerProvider } = require("@opentelemetry/sdk-trace");

async function main() {
  const [url, token, service] = process.argv.slice(2);
  const exporter = new OTLPTraceExporter({ url, headers: token ? { Authorization: "Bearer " + token } : {} });
  const provider = new TracerProvider({ resource: resourceFromAttributes({ "service.name": service || "js-sender" }) });
  const tracer = provider.getTracer("js-sender", "1.0.0");
  const root = tracer.startSpan("coordination.session", {
    kind: SpanKind.SERVER,
    attributes: { "massgen.task": "from node", "n.int": 42, "n.float": 1.5, flag: true, list: ["a", "b"], nums: [1, 2, 3] },
  });
  const child = tracer.startSpan(
    "agent.js.round_0",
    { kind: SpanKind.CLIENT, attributes: { api_key: "sk-" + "q".repeat(40), "massgen.usage.cost": 0.25 } },
    trace.setSpan(context.active(), root),
  );
  child.addEvent("started", { k: 1 });
  child.setStatus({ code: SpanStatusCode.ERROR, message: "boom" });
  child.end();
  root.end();
  // Export directly (not through a span processor) to read the exporter's own result.
  const spans = [child, root];
  const result = await new Promise((resolve) => exporter.export(spans, resolve));
  await exporter.shutdown();
  process.stdout.write(
    JSON.stringify({
      code: result.code,
      error: result.error ? String(result.error) : null,
      trace_id: root.spanContext().traceId,
      root: root.spanContext().spanId,
      child: child.spanContext().spanId,
    }) + "\n",
  );
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error) + "\n");
  process.exit(1);
});
