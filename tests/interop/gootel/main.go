// Command gootel is the Go side of asynqpy's trace interop test: a producer and a handler on the real
// github.com/hibiken/asynq (v0.26, the first release with task headers) and go.opentelemetry.io/otel's
// W3C trace-context propagator. It is a program of its own, so the goapp version matrix (asynq v0.23-v0.25,
// which have no headers) never needs OpenTelemetry.
//
// Usage:
//
//	gootel enqueue --redis host:port --db N --type T [--queue Q]   prints {"task_id", "trace_id", "span_id"}
//	gootel work --redis host:port --db N --type T [--queue Q]      handles one task of type T, prints
//	                                                               {"task_id", "trace_id", "parent_span_id", "traceparent"}
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

var propagator = propagation.TraceContext{}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gootel: "+format+"\n", args...)
	os.Exit(2)
}

func emit(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fail("encode output: %v", err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: gootel <enqueue|work> --redis host:port --db N --type T [--queue Q]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "Redis host:port")
	db := fs.Int("db", 0, "Redis database number")
	password := fs.String("password", "", "Redis password")
	typ := fs.String("type", "trace:demo", "task type")
	queue := fs.String("queue", "default", "queue")
	timeout := fs.Duration("timeout", 20*time.Second, "how long work waits for a task")
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail("%v", err)
	}
	conn := asynq.RedisClientOpt{Addr: *addr, DB: *db, Password: *password}
	tp := sdktrace.NewTracerProvider() // spans get real ids; nothing is exported
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tp.Tracer("gootel")
	switch os.Args[1] {
	case "enqueue":
		enqueue(conn, tracer, *typ, *queue)
	case "work":
		work(conn, tracer, *typ, *queue, *timeout)
	default:
		fail("unknown subcommand %q", os.Args[1])
	}
}

func enqueue(conn asynq.RedisClientOpt, tracer trace.Tracer, typ, queue string) {
	ctx, span := tracer.Start(context.Background(), "send "+queue, trace.WithSpanKind(trace.SpanKindProducer))
	headers := map[string]string{}
	propagator.Inject(ctx, propagation.MapCarrier(headers))
	client := asynq.NewClient(conn)
	defer client.Close()
	info, err := client.Enqueue(asynq.NewTaskWithHeaders(typ, []byte("{}"), headers), asynq.Queue(queue))
	if err != nil {
		fail("enqueue: %v", err)
	}
	span.End()
	sc := span.SpanContext()
	emit(map[string]string{"task_id": info.ID, "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()})
}

func work(conn asynq.RedisClientOpt, tracer trace.Tracer, typ, queue string, timeout time.Duration) {
	done := make(chan map[string]string, 1)
	srv := asynq.NewServer(conn, asynq.Config{Concurrency: 1, Queues: map[string]int{queue: 1},
		LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(typ, func(ctx context.Context, t *asynq.Task) error {
		headers := t.Headers()
		parent := propagator.Extract(ctx, propagation.MapCarrier(headers))
		_, span := tracer.Start(parent, "process "+queue, trace.WithSpanKind(trace.SpanKindConsumer))
		defer span.End()
		id, _ := asynq.GetTaskID(ctx)
		done <- map[string]string{"task_id": id, "trace_id": span.SpanContext().TraceID().String(),
			"parent_span_id": trace.SpanContextFromContext(parent).SpanID().String(),
			"traceparent": headers["traceparent"]}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		fail("start server: %v", err)
	}
	select {
	case out := <-done:
		srv.Shutdown()
		emit(out)
	case <-time.After(timeout):
		srv.Shutdown()
		fail("no task of type %s within %s", typ, timeout)
	}
}
