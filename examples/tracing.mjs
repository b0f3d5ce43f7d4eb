// OpenTelemetry for Baton's processes: registers a tracer provider that exports spans over
// OTLP/HTTP, before Baton starts. Load it into any `baton` process (dev, executor, worker, submit…)
// with Node's --import, e.g.
//
//   NODE_OPTIONS="--import ./examples/tracing.mjs" OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 npx baton dev
//
// The exporter reads the standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers; default
// http://localhost:4318). Each process names itself `baton-<command>` unless OTEL_SERVICE_NAME is
// set. In your own project: npm install @opentelemetry/sdk-trace-node @opentelemetry/resources
// @opentelemetry/exporter-trace-otlp-http, and copy this file.
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || `baton-${process.argv[2] ?? 'process'}` }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

// Send what is still batched before the process ends (a host stopped with Ctrl-C or SIGTERM
// drains, then ends the same way as a command that finished).
process.once('beforeExit', () => void provider.shutdown());
